"""ReadWriteOncePod: a claim with that access mode serves one pod in the cluster.

Upstream ``volume_restrictions.go`` PreFilter / AddPod / RemovePod / Filter. PreFilter
finds the pod's ``persistentVolumeClaim`` volumes whose claim asks for
ReadWriteOncePod and counts those some scheduled pod already uses (a missing claim
rejects the pod, UnschedulableAndUnresolvable, ``persistentvolumeclaim "x" not
found``). While the count is positive every node is Unschedulable with
``node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod
access mode``: Unschedulable, not unresolvable, because preempting the pod using the
claim frees it. AddPod/RemovePod (preemption's what-if, nominated pods) move the
count by the number of a pod's volumes naming one of those claims; like upstream they
compare claim names only, not namespaces.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from troupe.api.objects import Pod
from troupe.api.status import SKIP, Code, Status
from troupe.api.volumes import READ_WRITE_ONCE_POD, ClaimLister, ClaimUsers
from troupe.plugins.volumerestrictions.disks import ERR_DISK_CONFLICT, needs_check

ERR_RWOP_CONFLICT: Final = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)


@dataclass(frozen=True, slots=True)
class RestrictionState:
    """Upstream ``preFilterState``: the pod's ReadWriteOncePod claim names, and how
    many references scheduled pods hold to them."""

    rwop_claims: frozenset[str]
    conflicts: int

    def _references(self, pod: Pod) -> int:
        return sum(
            1
            for v in pod.spec.volumes
            if v.persistent_volume_claim is not None
            and v.persistent_volume_claim.claim_name in self.rwop_claims
        )

    def with_pod(self, pod: Pod) -> RestrictionState:
        """AddPod: ``pod`` (nominated, or a what-if) joins the node."""
        return replace(self, conflicts=self.conflicts + self._references(pod))

    def without_pod(self, pod: Pod) -> RestrictionState:
        """RemovePod: ``pod`` (a preemption victim) leaves."""
        return replace(self, conflicts=self.conflicts - self._references(pod))

    def verdict(self) -> Status:
        """The ReadWriteOncePod half of Filter, the same on every node."""
        if self.conflicts > 0:
            return Status(Code.UNSCHEDULABLE, (ERR_RWOP_CONFLICT,))
        return Status()


@dataclass(frozen=True, slots=True)
class RestrictionDecision:
    """PreFilter's outcome: SKIP, a rejection, or SUCCESS with the state."""

    status: Status
    state: RestrictionState | None = None


def pre_filter(pod: Pod, claims: ClaimLister, users: ClaimUsers) -> RestrictionDecision:
    needs_disk_check = any(needs_check(v) for v in pod.spec.volumes)
    namespace = pod.metadata.namespace
    rwop: set[str] = set()
    for volume in pod.spec.volumes:
        source = volume.persistent_volume_claim
        if source is None:
            continue
        pvc = claims.get_claim(namespace, source.claim_name)
        if pvc is None:
            return RestrictionDecision(
                Status(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                    (f'persistentvolumeclaim "{source.claim_name}" not found',),
                )
            )
        if READ_WRITE_ONCE_POD in pvc.spec.access_modes:
            rwop.add(pvc.metadata.name)
    conflicts = sum(1 for name in rwop if users.claim_in_use(namespace, name))
    if not needs_disk_check and conflicts == 0:
        return RestrictionDecision(SKIP)
    return RestrictionDecision(Status(), RestrictionState(frozenset(rwop), conflicts))


def filter_node(state: RestrictionState, disk_conflict: bool) -> Status:
    """Upstream Filter on one node: its disk conflict first, then ReadWriteOncePod."""
    if disk_conflict:
        return Status(Code.UNSCHEDULABLE, (ERR_DISK_CONFLICT,))
    return state.verdict()
