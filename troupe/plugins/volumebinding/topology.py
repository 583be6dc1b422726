"""Node masks for volume topology: PV node affinity, class allowedTopologies,
CSIStorageCapacity node topology, and the nodes bound local PVs pin a pod to.

The columnar side of VolumeBinding's Filter (``filter_batch``): each mask is built
from the NodeTable's label columns (``NodeTable.label_mask``), so a requirement is
evaluated once per distinct label value, not once per node, and a PV's affinity once
per cycle however many nodes there are. Every mask agrees with the per-node predicate
it stands for (``troupe.api.volumes.volume_fits_labels``, ``topology_terms_match``,
``troupe.api.selectors.label_selector_matches``); ``tests/plugins/volumebinding``
checks that on generated tables.

``eligible_node_names`` is upstream's ``GetEligibleNodes`` +
``GetLocalPersistentVolumeNodeNames`` (kubernetes#109877), with two corrections
documented in docs/volumes.md: hostname label values are resolved to node names
(kubernetes#125336), and a PV narrows only when every one of its terms names hosts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from troupe.api.nodetable import BoolArray, NodeTable
from troupe.api.objects import LabelSelector, NodeSelectorTerm
from troupe.api.selectors import (
    node_selector_term_is_valid,
    requirement_is_valid,
    requirement_matches,
    validate_label_selector,
)
from troupe.api.storage import PersistentVolume, PersistentVolumeClaim, TopologySelectorTerm
from troupe.api.volumes import HOSTNAME_LABEL, VolumeLister, volume_fits_labels


def _requirement_mask(
    table: NodeTable, key: str, operator: str, values: Sequence[str]
) -> BoolArray:
    return table.label_mask(key, lambda value: requirement_matches(operator, values, value))


def _labels_term_mask(table: NodeTable, term: NodeSelectorTerm) -> BoolArray:
    """One node selector term against node labels only (``CheckNodeAffinity`` builds
    a node without a name, so ``matchFields`` are not evaluated)."""
    if (not term.match_expressions and not term.match_fields) or not node_selector_term_is_valid(
        term
    ):
        return np.zeros(table.capacity, dtype=bool)
    mask = table.present.copy()
    for req in term.match_expressions:
        mask &= _requirement_mask(table, req.key, req.operator, req.values)
    return mask


def volume_affinity_mask(table: NodeTable, pv: PersistentVolume) -> BoolArray:
    """The nodes ``volume_fits_labels(pv, labels)`` accepts."""
    affinity = pv.spec.node_affinity
    if affinity is None or affinity.required is None:
        return table.present.copy()
    mask = np.zeros(table.capacity, dtype=bool)
    for term in affinity.required.node_selector_terms:
        mask |= _labels_term_mask(table, term)
    return mask


def topology_terms_mask(table: NodeTable, terms: Sequence[TopologySelectorTerm]) -> BoolArray:
    """The nodes ``topology_terms_match(terms, labels)`` accepts."""
    if not terms:
        return table.present.copy()
    mask = np.zeros(table.capacity, dtype=bool)
    for term in terms:
        reqs = term.match_label_expressions
        if not reqs or not all(requirement_is_valid(r.key, "In", tuple(r.values)) for r in reqs):
            continue
        term_mask = table.present.copy()
        for req in reqs:
            term_mask &= _requirement_mask(table, req.key, "In", req.values)
        mask |= term_mask
    return mask


def label_selector_mask(table: NodeTable, selector: LabelSelector | None) -> BoolArray:
    """The nodes whose labels ``label_selector_matches(selector, labels)`` accepts:
    None and invalid selectors match none, an empty selector all."""
    if selector is None or validate_label_selector(selector, ""):
        return np.zeros(table.capacity, dtype=bool)
    mask = table.present.copy()
    for key, value in selector.match_labels.items():
        mask &= _requirement_mask(table, key, "In", (value,))
    for req in selector.match_expressions:
        mask &= _requirement_mask(table, req.key, req.operator, req.values)
    return mask


@dataclass(frozen=True, slots=True)
class Fit:
    """The nodes a PV's affinity admits: a mask, or (for a local PV, pinned to named
    hosts) the few slots, so thousands of local PVs cost no node-sized arrays."""

    dense: BoolArray | None = None
    slots: frozenset[int] = frozenset()

    def admits(self, slot: int) -> bool:
        return bool(self.dense[slot]) if self.dense is not None else slot in self.slots

    def mask(self, capacity: int) -> BoolArray:
        if self.dense is not None:
            return self.dense
        mask = np.zeros(capacity, dtype=bool)
        mask[list(self.slots)] = True
        return mask


class VolumeFits:
    """``Fit`` per PV, kept while the table's nodes (their labels) do not change.
    Keyed by PV name and checked against the affinity object itself, so an assumed copy
    of a PV (same affinity) reuses it and a changed PV does not."""

    def __init__(self) -> None:
        self._generation = -1
        self._capacity = -1
        self._fits: dict[str, tuple[object, Fit]] = {}
        self._hosts: dict[str, list[int]] | None = None

    def fit(self, table: NodeTable, pv: PersistentVolume) -> Fit:
        if table.node_generation != self._generation or table.capacity != self._capacity:
            self._fits.clear()
            self._hosts = None
            self._generation = table.node_generation
            self._capacity = table.capacity
        affinity = pv.spec.node_affinity
        cached = self._fits.get(pv.metadata.name)
        if cached is not None and cached[0] is affinity:
            return cached[1]
        fit = self._compute(table, pv)
        self._fits[pv.metadata.name] = (affinity, fit)
        return fit

    def _compute(self, table: NodeTable, pv: PersistentVolume) -> Fit:
        hosts = local_volume_hostnames(pv)
        if hosts is None:
            return Fit(dense=volume_affinity_mask(table, pv))
        by_host = self._host_slots(table)
        slots = frozenset(
            slot
            for host in hosts
            for slot in by_host.get(host, ())
            if volume_fits_labels(pv, table.node(slot).metadata.labels)
        )
        return Fit(slots=slots)

    def _host_slots(self, table: NodeTable) -> dict[str, list[int]]:
        if self._hosts is None:
            hosts: dict[str, list[int]] = {}
            for slot in table.slots():
                host = table.label_value(int(slot), HOSTNAME_LABEL)
                if host is not None:
                    hosts.setdefault(host, []).append(int(slot))
            self._hosts = hosts
        return self._hosts


# --- bound local volumes ----------------------------------------------------------------


def local_volume_hostnames(pv: PersistentVolume) -> frozenset[str] | None:
    """The ``kubernetes.io/hostname`` values a PV's required affinity confines it to,
    or None when it does not confine it to named hosts (no affinity, or a term without
    a ``hostname In`` requirement, which other nodes may satisfy). Within a term the
    ``In`` lists intersect; across terms they unite."""
    affinity = pv.spec.node_affinity
    if affinity is None or affinity.required is None:
        return None
    terms = affinity.required.node_selector_terms
    if not terms:
        return None
    hosts: set[str] = set()
    for term in terms:
        term_hosts: set[str] | None = None
        for req in term.match_expressions:
            if req.key == HOSTNAME_LABEL and req.operator == "In":
                values = set(req.values)
                term_hosts = values if term_hosts is None else term_hosts & values
        if term_hosts is None:
            return None
        hosts |= term_hosts
    return frozenset(hosts)


def eligible_node_names(
    bound_claims: Iterable[PersistentVolumeClaim], volumes: VolumeLister, table: NodeTable
) -> frozenset[str] | None:
    """The only nodes the pod's bound local PVs allow (their hostname sets
    intersected, then resolved to the names of the nodes carrying those hostname
    labels), or None when the bound claims do not narrow the nodes: no claim is
    bound to a local PV, or a bound PV is missing (Filter reports that one)."""
    hosts: frozenset[str] | None = None
    for pvc in bound_claims:
        pv = volumes.get_volume(pvc.spec.volume_name)
        if pv is None:
            return None
        pv_hosts = local_volume_hostnames(pv)
        if pv_hosts is None:
            continue
        hosts = pv_hosts if hosts is None else hosts & pv_hosts
    if hosts is None:
        return None
    mask = table.label_mask(HOSTNAME_LABEL, lambda value: value in hosts) & table.present
    return frozenset(table.names[int(slot)] for slot in np.flatnonzero(mask))
