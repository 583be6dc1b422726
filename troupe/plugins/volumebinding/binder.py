"""VolumeBinding Filter on one node, exactly as upstream ``FindPodVolumes``.

For the claims PreFilter sorted (``claims.sort_claims``):

1. bound claims, in pod order: the first whose PV is missing
   (``... bound to non-existent pv(s)``) or does not admit the node
   (``... volume node affinity conflict``) decides that reason;
2. unbound WaitForFirstConsumer claims: one already carrying
   ``volume.kubernetes.io/selected-node`` for another node rejects the node at once
   (``didn't find available persistent volumes to bind``); the others are matched
   statically (``matching.match_volumes``), and the claims left over, with those whose
   selected node is this one, must be provisionable here (``matching.ProvisionRule``):
   a class that cannot provision or whose ``allowedTopologies`` exclude the node
   gives the bind conflict, missing CSIStorageCapacity ``did not have enough free
   storage``.

Reasons accumulate in upstream's order (``model.REASON_ORDER``); all of them are
UnschedulableAndUnresolvable. A ``VolumeError`` (a class that vanished, a claim
selector that does not parse) is an error for the whole cycle.

This is the reference the columnar Filter (``filter_batch``) is checked against, and
what computes a chosen node's bindings for Reserve.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from troupe.api.objects import Node
from troupe.api.storage import PersistentVolume, PersistentVolumeClaim
from troupe.api.volumes import ANN_SELECTED_NODE, VolumeError, volume_fits_labels
from troupe.plugins.volumebinding.matching import match_volumes, provision_rule
from troupe.plugins.volumebinding.model import (
    ERR_BIND_CONFLICT,
    ERR_NODE_CONFLICT,
    ERR_NOT_ENOUGH_SPACE,
    ERR_PV_NOT_EXIST,
    REASON_ORDER,
    BindingInfo,
    DynamicProvision,
    Listers,
    NodeVolumes,
    PodClaims,
    PodVolumes,
)


def check_bound_claims(
    bound: tuple[PersistentVolumeClaim, ...], labels: Mapping[str, str], listers: Listers
) -> str | None:
    """Upstream ``checkBoundClaims``: the reason the first bad bound claim gives."""
    for pvc in bound:
        pv = listers.volumes.get_volume(pvc.spec.volume_name)
        if pv is None:
            return ERR_PV_NOT_EXIST
        if not volume_fits_labels(pv, labels):
            return ERR_NODE_CONFLICT
    return None


def check_provisions(
    claims: list[PersistentVolumeClaim], labels: Mapping[str, str], listers: Listers
) -> tuple[str | None, tuple[DynamicProvision, ...]]:
    """Upstream ``checkVolumeProvisions``: the reason the first claim that cannot be
    provisioned here gives (None: all can), and the provisions."""
    provisions: list[DynamicProvision] = []
    for pvc in claims:
        rule = provision_rule(pvc, listers)
        if rule.error is not None:
            raise VolumeError(rule.error)
        if not rule.can_provision or not rule.topology_fits(labels):
            return ERR_BIND_CONFLICT, ()
        room, capacity = rule.capacity_for(labels)
        if not room:
            return ERR_NOT_ENOUGH_SPACE, ()
        provisions.append(DynamicProvision(pvc, capacity))
    return None, tuple(provisions)


def find_pod_volumes(claims: PodClaims, node: Node, listers: Listers) -> NodeVolumes:
    """Upstream ``FindPodVolumes``: why ``node`` cannot serve the pod's claims, or
    what binding them there takes. Raises ``VolumeError``."""
    labels = node.metadata.labels
    reasons: set[str] = set()
    bound_reason = check_bound_claims(claims.bound, labels, listers) if claims.bound else None
    if bound_reason is not None:
        reasons.add(bound_reason)
    bindings: tuple[BindingInfo, ...] = ()
    provisions: tuple[DynamicProvision, ...] = ()
    if claims.delayed:
        to_match: list[PersistentVolumeClaim] = []
        to_provision: list[PersistentVolumeClaim] = []
        conflict = False
        for pvc in claims.delayed:
            selected = pvc.metadata.annotations.get(ANN_SELECTED_NODE)
            if selected is None:
                to_match.append(pvc)
            elif selected != node.metadata.name:
                conflict = True
                break
            else:
                to_provision.append(pvc)
        if conflict:
            reasons.add(ERR_BIND_CONFLICT)
        else:
            unbound_reason = None
            if to_match:
                fits = _fits(labels)
                match = match_volumes(to_match, claims.candidates, fits)
                bindings = match.bindings
                to_provision.extend(match.unmatched)
                if not match.all_found:
                    unbound_reason = ERR_BIND_CONFLICT
            if to_provision:
                unbound_reason, provisions = check_provisions(to_provision, labels, listers)
            if unbound_reason is not None:
                reasons.add(unbound_reason)
    ordered = tuple(r for r in REASON_ORDER if r in reasons)
    if ordered:
        return NodeVolumes(ordered)
    return NodeVolumes((), PodVolumes(bindings, provisions))


def _fits(labels: Mapping[str, str]) -> Callable[[PersistentVolume], bool]:
    def fits(pv: PersistentVolume) -> bool:
        return volume_fits_labels(pv, labels)

    return fits
