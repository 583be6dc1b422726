"""Delayed, workload-aware preemption for gangs (KEP-5710), the first version.

The group cycle (``troupe.scheduler.gangs.group_cycle``) calls
``GangPreemption.attempt`` when a gang misses its quorum, after
it has reverted that attempt's placements. In the same snapshot (the cycle does not
yield), on the live NodeTable:

1. **Candidates**: every bound pod of lower priority than the gang that is not a
   member of a gang-policy group (whole victim gangs are not chosen yet: such pods
   are never victims in this version).
2. **Dry run**: every candidate is taken off the table and the gang is placed with
   the ordinary member placement (``GangPlacer.place_quorum``), then reverted. Quorum missed:
   the gang does not fit even so, and nothing is evicted.
3. **Reprieve**: the candidates on nodes the gang did not use go back at once (if
   the gang still fits); then the others one at a time, those whose eviction would
   break a PodDisruptionBudget first, then most important first, each one kept if the
   gang still reaches its quorum beside it. What could not go back are the victims.
   Every candidate is back on the table before ``attempt`` returns.
4. **Commit**: only that plan, ``DisruptionPlan(victims, nominated={member: node})``,
   goes to the PermitDisruption plugins; on SUCCESS ``Preemptions.actuate_group``
   nominates the members and evicts every victim.

While a gang's preemption is in flight or its victims are still in the cache, the
gang does not preempt again (``waiting``). See docs/preemption.md, "Gangs".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from troupe.api.cycle import CycleState
from troupe.api.framework import DisruptionPlan
from troupe.api.gangs import GangPolicy, GroupKey, group_ref_of
from troupe.api.pdb import PodDisruptionBudget
from troupe.api.podinfo import PodInfo
from troupe.plugins.defaultpreemption.victims import importance, split_by_pdb_violation
from troupe.queue.entity import QueuedGroupInfo
from troupe.scheduler.cache import Cache
from troupe.scheduler.cycle.evictions import Preemptions
from troupe.scheduler.cycle.failure import failure_message
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.gangs.directory import GangDirectory

Result = Literal["preempted", "unschedulable", "rejected", "waiting"]

# (member key -> node) of a placement reaching quorum, or None.
PlaceFn = Callable[
    [Framework, QueuedGroupInfo, GangPolicy, list[PodInfo], int], dict[str, str] | None
]


@dataclass(frozen=True, slots=True)
class PreemptionOutcome:
    result: Result
    # What the gang's members and group are told, after the placement's own reasons.
    message: str
    plan: DisruptionPlan | None = None


class GangPreemption:
    def __init__(
        self,
        *,
        preemptions: Preemptions,
        cache: Cache,
        groups: GangDirectory,
        pdbs: Mapping[str, PodDisruptionBudget],
        new_cycle_state: Callable[[], CycleState],
        place: PlaceFn,
    ) -> None:
        self._preemptions = preemptions
        self._cache = cache
        self._groups = groups
        self._pdbs = pdbs
        self._new_cycle_state = new_cycle_state
        self._place = place
        # The victims (key, uid) of each gang's last preemption, until they are gone.
        self._victims: dict[GroupKey, list[tuple[str, str]]] = {}

    def forget(self, key: GroupKey) -> None:
        """The gang was admitted: its preemption is over."""
        self._victims.pop(key, None)

    def waiting(self, entity: QueuedGroupInfo) -> int:
        """How many victims of the gang's last preemption are still there (at least 1
        while its evictions are being sent); 0 when it may preempt again."""
        if self._preemptions.in_flight_group(entity.ref):
            return max(1, len(self._victims.get(entity.ref.key, ())))
        pending = self._victims.get(entity.ref.key)
        if not pending:
            return 0
        left = [(k, uid) for k, uid in pending if self._cache.uid_of(k) == uid]
        if left:
            self._victims[entity.ref.key] = left
        else:
            del self._victims[entity.ref.key]
        return len(left)

    def attempt(
        self,
        fwk: Framework,
        entity: QueuedGroupInfo,
        policy: GangPolicy,
        members: list[PodInfo],
        already: int,
    ) -> PreemptionOutcome | None:
        """Preempt for a gang below quorum if that makes the whole gang fit; None when
        it may not or has nothing it could evict."""
        if not policy.gang or already >= policy.min_count:
            return None
        if any(m.pod.spec.preemption_policy == "Never" for m in members):
            return None
        left = self.waiting(entity)
        if left:
            return PreemptionOutcome(
                "waiting", f"preemption: waiting for {left} preempted pod(s) to terminate"
            )
        candidates = self._candidates(entity.priority)
        if not candidates:
            return None
        plan = self._dry_run(fwk, entity, policy, members, already, candidates)
        if plan is not None and not plan.victims:
            # It fits beside every candidate: eviction is not what it lacks.
            return None
        if plan is None:
            self._preemptions.workload_attempt("unschedulable")
            return PreemptionOutcome(
                "unschedulable",
                "preemption: the gang does not fit even with every lower-priority pod evicted",
            )
        # Run "permitDisruption" plugins: the whole gang fits with the plan.
        status = fwk.run_permit_disruption(self._new_cycle_state(), plan)
        if not status.is_success:
            self._preemptions.workload_attempt("rejected")
            return PreemptionOutcome(
                "rejected", f"preemption refused: {failure_message(status, None)}"
            )
        self._preemptions.workload_attempt("preempted")
        self._victims[entity.ref.key] = [(v.key, v.pod.metadata.uid) for v in plan.victims]
        self._preemptions.actuate_group(fwk.name, entity.ref, entity.priority, entity.members, plan)
        return PreemptionOutcome(
            "preempted",
            f"preemption: {len(plan.victims)} lower-priority pod(s) are being evicted "
            "to make room for the gang",
            plan,
        )

    def _candidates(self, priority: int) -> list[tuple[PodInfo, str]]:
        """(pod, node) of every bound pod of lower priority that is no gang member."""
        table = self._cache.table
        out: list[tuple[PodInfo, str]] = []
        for slot in np.flatnonzero(table.present):
            node = table.names[int(slot)]
            for info in table.pods[int(slot)].values():
                # Assumed but not bound: its binding is in flight; not a victim.
                if info.priority >= priority or not info.pod.spec.node_name:
                    continue
                ref = group_ref_of(info.pod)
                if ref is not None:
                    victim_policy = self._groups.policy(ref)
                    if victim_policy is None or victim_policy.gang:
                        continue
                out.append((info, node))
        return out

    def _dry_run(
        self,
        fwk: Framework,
        entity: QueuedGroupInfo,
        policy: GangPolicy,
        members: list[PodInfo],
        already: int,
        candidates: list[tuple[PodInfo, str]],
    ) -> DisruptionPlan | None:
        table = self._cache.table

        def fits() -> dict[str, str] | None:
            return self._place(fwk, entity, policy, members, already)

        off: dict[str, tuple[PodInfo, str]] = {}
        try:
            for info, node in candidates:
                if table.remove_pod(info, node):
                    off[info.key] = (info, node)
            nominated = fits()
            if nominated is None:
                return None
            # Nodes the gang does not use keep their pods, if the gang still fits.
            used = set(nominated.values())
            idle = [(info, node) for info, node in off.values() if node not in used]
            for info, node in idle:
                table.add_pod(info, node)
                del off[info.key]
            if idle:
                again = fits()
                if again is None:
                    for info, node in idle:
                        table.remove_pod(info, node)
                        off[info.key] = (info, node)
                else:
                    nominated = again
            # Reprieve the rest one at a time, budget-breaking and important ones first.
            ordered = sorted((info for info, _ in off.values()), key=importance)
            violating, others = split_by_pdb_violation(ordered, list(self._pdbs.values()))
            for info in [*violating, *others]:
                _, node = off.pop(info.key)
                table.add_pod(info, node)
                again = fits()
                if again is None:
                    table.remove_pod(info, node)
                    off[info.key] = (info, node)
                else:
                    nominated = again
            victims = tuple(sorted((info for info, _ in off.values()), key=importance))
            return DisruptionPlan(victims, nominated)
        finally:
            for info, node in off.values():
                table.add_pod(info, node)
