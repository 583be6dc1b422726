"""VolumeBinding Filter over a mask of candidate nodes at once (DESIGN.md "Fast paths
stay columnar").

Gives every candidate node the verdict ``binder.find_pod_volumes`` would, without a
Python pass per node:

* bound claims: each PV's node affinity is a ``topology.Fit`` (a mask from the label
  columns, or the few slots of a local PV), evaluated once per PV and kept while the
  nodes do not change;
* ``selected-node`` annotations: a comparison of slot names;
* static matching depends on a node only through which candidate PVs admit it, so the
  nodes are grouped by that (nodes no local PV names share one group) and
  ``matching.match_volumes`` runs once per group, on the PVs that matter to it;
* provisioning checks are masks per claim (``allowedTopologies``, the union of the
  capacities' ``nodeTopology``), walked in upstream's claim order within each group.

Exact by construction (every node of a group sees the same PVs); the property test in
``tests/plugins/volumebinding/test_filter_batch.py`` compares it with the per-node
reference on generated clusters. A pod without unbound or bound claims never gets
here (PreFilter skips it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from troupe.api.framework import Rejection
from troupe.api.nodetable import BoolArray, IntArray, NodeTable
from troupe.api.selectors import label_selector_matches
from troupe.api.status import Code
from troupe.api.storage import PersistentVolume, PersistentVolumeClaim
from troupe.api.volumes import (
    ANN_SELECTED_NODE,
    VOLUME_AVAILABLE,
    VolumeError,
    access_modes_fit,
    capacity_nanos,
    claim_class,
    is_volume_bound_to_claim,
    requested_nanos,
    volume_class,
    volume_mode_mismatch,
)
from troupe.plugins.volumebinding.matching import ProvisionRule, match_volumes, provision_rule
from troupe.plugins.volumebinding.model import (
    ERR_BIND_CONFLICT,
    ERR_NODE_CONFLICT,
    ERR_NOT_ENOUGH_SPACE,
    ERR_PV_NOT_EXIST,
    REASON_ORDER,
    BindingInfo,
    DynamicProvision,
    Listers,
    PodClaims,
    PodVolumes,
)
from troupe.plugins.volumebinding.topology import (
    VolumeFits,
    label_selector_mask,
    topology_terms_mask,
)


@dataclass(frozen=True, slots=True)
class _Group:
    """Nodes that see the same PVs: one static match, one list of claims to provision."""

    bindings: tuple[BindingInfo, ...]
    to_provision: tuple[PersistentVolumeClaim, ...]


@dataclass(slots=True)
class VolumeFilter:
    """The verdict on every candidate node, and what binding on a feasible one takes."""

    feasible: BoolArray
    reasons: dict[str, BoolArray]
    # An error for the whole cycle (upstream: a Filter error on some node).
    error: str | None = None
    _table: NodeTable | None = None
    _group_of: IntArray | None = None
    _groups: list[_Group] = field(default_factory=list)
    _rules: dict[str, ProvisionRule] = field(default_factory=dict)

    def rejections(self) -> list[Rejection]:
        """Every reason with its nodes, UnschedulableAndUnresolvable, in upstream's order."""
        return [
            Rejection(reason, mask, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
            for reason, mask in self.reasons.items()
            if mask.any()
        ]

    def volumes_for(self, slot: int) -> PodVolumes:
        """What binding the pod on the feasible node at ``slot`` takes (Reserve,
        Score): the group's static bindings, and the claims to provision with the
        first CSIStorageCapacity that admits this node."""
        if not self.feasible[slot]:
            raise KeyError(f"slot {slot} is not feasible for the pod's volumes")
        if self._group_of is None or self._table is None or self._group_of[slot] < 0:
            return PodVolumes()
        group = self._groups[int(self._group_of[slot])]
        labels = self._table.node(slot).metadata.labels
        provisions = []
        for pvc in group.to_provision:
            _, capacity = self._rules[pvc.key].capacity_for(labels)
            provisions.append(DynamicProvision(pvc, capacity))
        return PodVolumes(group.bindings, tuple(provisions))


def filter_volumes(
    claims: PodClaims,
    table: NodeTable,
    candidates: BoolArray,
    listers: Listers,
    fits: VolumeFits,
) -> VolumeFilter:
    """``find_pod_volumes`` for every node set in ``candidates``."""
    reasons = {reason: np.zeros(table.capacity, dtype=bool) for reason in REASON_ORDER}
    result = VolumeFilter(candidates.copy(), reasons, _table=table)
    _check_bound(claims.bound, table, candidates, listers, fits, reasons)
    if claims.delayed:
        _check_unbound(claims, table, candidates, listers, fits, result)
    rejected = np.zeros(table.capacity, dtype=bool)
    for mask in reasons.values():
        rejected |= mask
    result.feasible &= ~rejected
    return result


def _check_bound(
    bound: Sequence[PersistentVolumeClaim],
    table: NodeTable,
    candidates: BoolArray,
    listers: Listers,
    fits: VolumeFits,
    reasons: dict[str, BoolArray],
) -> None:
    """The first bad bound claim of each node decides its reason."""
    undecided = candidates.copy()
    for pvc in bound:
        pv = listers.volumes.get_volume(pvc.spec.volume_name)
        if pv is None:
            reasons[ERR_PV_NOT_EXIST] |= undecided
            return
        admitted = fits.fit(table, pv).mask(table.capacity)
        reasons[ERR_NODE_CONFLICT] |= undecided & ~admitted
        undecided &= admitted


def _check_unbound(
    claims: PodClaims,
    table: NodeTable,
    candidates: BoolArray,
    listers: Listers,
    fits: VolumeFits,
    result: VolumeFilter,
) -> None:
    live = candidates.copy()
    selected: list[PersistentVolumeClaim] = []
    to_match: list[PersistentVolumeClaim] = []
    for pvc in claims.delayed:
        node_name = pvc.metadata.annotations.get(ANN_SELECTED_NODE)
        if node_name is None:
            to_match.append(pvc)
            continue
        selected.append(pvc)
        slot = table.slot(node_name)
        only = np.zeros(table.capacity, dtype=bool)
        if slot is not None:
            only[slot] = True
        live &= only
    result.reasons[ERR_BIND_CONFLICT] |= candidates & ~live
    if not live.any():
        return
    relevant = _relevant_volumes(to_match, claims)
    group_of, representatives = _group_nodes(table, live, relevant, fits)
    result._group_of = group_of
    masks: dict[str, tuple[BoolArray, BoolArray | None]] = {}
    for index, rep in enumerate(representatives):
        members = group_of == index
        group = _match_group(claims, to_match, selected, relevant, table, rep, fits)
        if isinstance(group, VolumeError):
            _fail(result, members, str(group))
            group = _Group((), ())
        else:
            _walk_provisions(group.to_provision, members, table, listers, result, masks)
        result._groups.append(group)


def _fail(result: VolumeFilter, nodes: BoolArray, message: str) -> None:
    if nodes.any():
        result.feasible &= ~nodes
        if result.error is None:
            result.error = message


def _relevant_volumes(
    to_match: Sequence[PersistentVolumeClaim], claims: PodClaims
) -> list[PersistentVolume]:
    """The candidate PVs that pass every node-independent check of
    ``matching.find_matching_volume`` for at least one claim: the only ones whose
    node affinity can change a match."""
    relevant: dict[str, PersistentVolume] = {}
    for pvc in to_match:
        requested = requested_nanos(pvc)
        wanted_class = claim_class(pvc)
        vac = pvc.spec.volume_attributes_class_name or ""
        selector = pvc.spec.selector
        for pv in claims.candidates.get(wanted_class, ()):
            bound_here = is_volume_bound_to_claim(pv, pvc)
            if pv.spec.claim_ref is not None and not bound_here:
                continue
            if capacity_nanos(pv) < requested or volume_mode_mismatch(pvc, pv):
                continue
            if (pv.spec.volume_attributes_class_name or "") != vac:
                continue
            if pv.metadata.deletion_timestamp is not None:
                continue
            if not bound_here and (
                pv.status.phase != VOLUME_AVAILABLE
                or (
                    selector is not None
                    and not label_selector_matches(selector, pv.metadata.labels)
                )
                or volume_class(pv) != wanted_class
                or not access_modes_fit(pvc, pv)
            ):
                continue
            relevant[pv.metadata.name] = pv
    return [relevant[name] for name in sorted(relevant)]


def _group_nodes(
    table: NodeTable, live: BoolArray, relevant: Sequence[PersistentVolume], fits: VolumeFits
) -> tuple[IntArray, list[int]]:
    """A group index per slot (-1 outside ``live``) such that the nodes of a group
    are admitted by exactly the same relevant PVs, and one representative slot each."""
    live_slots = np.flatnonzero(live)
    dense = [fit.dense for pv in relevant if (fit := fits.fit(table, pv)).dense is not None]
    if dense:
        bits = np.packbits(np.stack([d[live_slots] for d in dense]), axis=0)
        _, inverse = np.unique(bits.T, axis=0, return_inverse=True)
        base = inverse.reshape(-1)
    else:
        base = np.zeros(len(live_slots), dtype=np.intp)
    # Local PVs refine the groups of the few nodes they name.
    named: dict[int, list[str]] = {}
    for pv in relevant:
        fit = fits.fit(table, pv)
        if fit.dense is None:
            for slot in fit.slots:
                named.setdefault(slot, []).append(pv.metadata.name)
    keys: dict[tuple[int, tuple[str, ...]], int] = {}
    group_of = np.full(table.capacity, -1, dtype=np.int64)
    representatives: list[int] = []
    for position, slot in enumerate(live_slots.tolist()):
        key = (int(base[position]), tuple(named.get(slot, ())))
        index = keys.get(key)
        if index is None:
            index = keys[key] = len(representatives)
            representatives.append(slot)
        group_of[slot] = index
    return group_of, representatives


def _match_group(
    claims: PodClaims,
    to_match: Sequence[PersistentVolumeClaim],
    selected: Sequence[PersistentVolumeClaim],
    relevant: Sequence[PersistentVolume],
    table: NodeTable,
    rep: int,
    fits: VolumeFits,
) -> _Group | VolumeError:
    if not to_match:
        return _Group((), tuple(selected))

    def admits(pv: PersistentVolume) -> bool:
        return fits.fit(table, pv).admits(rep)

    # Only relevant PVs can be chosen; the others are left out, which changes nothing.
    names = {pv.metadata.name for pv in relevant}
    candidates = {
        name: tuple(pv for pv in pvs if pv.metadata.name in names)
        for name, pvs in claims.candidates.items()
    }
    try:
        match = match_volumes(to_match, candidates, admits)
    except VolumeError as error:
        return error
    return _Group(match.bindings, (*selected, *match.unmatched))


def _walk_provisions(
    to_provision: Sequence[PersistentVolumeClaim],
    members: BoolArray,
    table: NodeTable,
    listers: Listers,
    result: VolumeFilter,
    masks: dict[str, tuple[BoolArray, BoolArray | None]],
) -> None:
    """Upstream ``checkVolumeProvisions`` for a group: the first claim that cannot be
    provisioned on a node decides its reason. ``masks`` keeps each claim's topology
    and capacity masks across groups."""
    undecided = members.copy()
    for pvc in to_provision:
        rule = result._rules.get(pvc.key)
        if rule is None:
            rule = result._rules[pvc.key] = provision_rule(pvc, listers)
        if rule.error is not None:
            _fail(result, undecided, rule.error)
            return
        if not rule.can_provision:
            result.reasons[ERR_BIND_CONFLICT] |= undecided
            return
        cached = masks.get(pvc.key)
        if cached is None:
            cached = masks[pvc.key] = _provision_masks(rule, table)
        topology, room = cached
        result.reasons[ERR_BIND_CONFLICT] |= undecided & ~topology
        undecided &= topology
        if room is not None:
            result.reasons[ERR_NOT_ENOUGH_SPACE] |= undecided & ~room
            undecided &= room


def _provision_masks(rule: ProvisionRule, table: NodeTable) -> tuple[BoolArray, BoolArray | None]:
    """The nodes the class's ``allowedTopologies`` admit, and (None: not checked) the
    nodes some large enough capacity of the class admits."""
    assert rule.storage_class is not None
    topology = topology_terms_mask(table, rule.storage_class.allowed_topologies)
    if rule.capacities is None:
        return topology, None
    room = np.zeros(table.capacity, dtype=bool)
    for capacity in rule.capacities:
        if capacity.node_topology is not None:
            room |= label_selector_mask(table, capacity.node_topology)
    return topology, room
