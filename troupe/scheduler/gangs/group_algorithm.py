"""The pod-group scheduling algorithm: an attempt in, a ``GroupResult`` out.

``GroupAlgorithm.schedule`` is upstream's ``podGroupSchedulingAlgorithm`` with
KEP-5710's preemption after it (kubernetes/kubernetes
``pkg/scheduler/schedule_one_podgroup.go``), on the live NodeTable (one snapshot:
nothing here yields):

1. a gang held by its last preemption is placed on the nodes it nominated
   (``GangPreemption.held_to``), else the members are placed with the group's
   topology (``troupe.scheduler.gangs.topology``; minResources and member order in
   ``troupe.scheduler.gangs.placement``), each assumed and reserved at once;
2. the quorum is counted: bound or assumed before + placed now >= ``minCount``, or
   for a CompositePodGroup its own rule (``troupe.scheduler.gangs.composite_quorum``);
3. below it, every placement is reverted (last first) and a gang that outranks
   running pods may preempt as a whole (``troupe.scheduler.gangs.preemption``):
   the result is ``waiting`` when it did, else ``rejected``;
4. at quorum, Permit runs for every placed member; a rejection reverts them all.

It does not touch the queue, bind, or tell anyone: the submit step
(``troupe.scheduler.gangs.submit``) acts on the result.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from troupe.scheduler.cycle.failure import failure_message
from troupe.scheduler.framework.waiting_pods import WaitingPods
from troupe.scheduler.gangs import composite_quorum
from troupe.scheduler.gangs.attempt import GroupAttempt, GroupResult, Placement
from troupe.scheduler.gangs.placement import GangPlacer
from troupe.scheduler.gangs.preemption import GangPreemption
from troupe.scheduler.gangs.topology import TopologyAttempt, TopologyPlacer


@dataclass(eq=False, kw_only=True)
class GroupAlgorithm:
    placer: GangPlacer
    topology: TopologyPlacer
    preemption: GangPreemption
    waiting: WaitingPods

    def schedule(self, attempt: GroupAttempt) -> GroupResult:
        """Place, count and permit; every placement of a result that is not
        ``placed`` is reverted already."""
        found = self._place_held(attempt) or self.topology.place(attempt)
        go, held_back, progress = self._quorum(attempt, found)
        if found.shortfall or not go:
            # Below quorum, or (late members of a gang that has its quorum) none fit.
            placed = found.placed if go is None else go
            return self._below_quorum(attempt, found, placed, progress)
        placed = go
        # Run "permit" plugins for every placed member; a rejection fails the gang.
        fwk = attempt.fwk
        for p in placed:
            status = fwk.binding.run_permit(p.state, p.info, p.result.node, self.waiting)
            if not (status.is_success or status.is_wait):
                self.placer.revert(fwk, placed)
                why = f"{p.info.key} rejected at Permit: {failure_message(status, None)}"
                return GroupResult("rejected", tuple(placed), ((p.info, status, None),), why=why)
        return GroupResult(
            "placed",
            tuple(placed),
            tuple(found.failures),
            tuple(held_back),
            progress=progress,
            domain=found.domain,
        )

    def _place_held(self, attempt: GroupAttempt) -> TopologyAttempt | None:
        """A gang that preempted goes where its preemption nominated it: there when
        its quorum fits, else (victims still terminating) nowhere yet. None: placed as
        any gang (no hold, or the victims are gone and the nominated nodes no longer
        hold it)."""
        policy = attempt.policy
        held = self.preemption.held_to(attempt.entity) if policy.tree is None else {}
        if not held:
            return None
        found = TopologyAttempt(*self.placer.place_held(attempt, held))
        if attempt.already + len(found.placed) < policy.min_count and not (
            self.preemption.waiting(attempt.entity)
        ):
            self.placer.revert(attempt.fwk, found.placed)
            return None
        return found

    def _quorum(
        self, attempt: GroupAttempt, found: TopologyAttempt
    ) -> tuple[list[Placement] | None, list[Placement], str]:
        """(the placements that go ahead, None below the quorum; a composite's
        placements of leaves below their own quorum, reverted; where the attempt
        got, if the placer or the composite says it)."""
        policy, placed = attempt.policy, found.placed
        tree = policy.tree
        if tree is None:
            quorum = not policy.gang or attempt.already + len(placed) >= policy.min_count
            return (placed if quorum else None), [], found.state
        # KEP-6012: at least minGroupCount children at their own quorum, or nothing.
        split = composite_quorum.split(tree, attempt.before, placed)
        if split.kept is None:
            return None, [], split.state
        self.placer.revert(attempt.fwk, split.held_back)
        return split.kept, split.held_back, split.state

    def _below_quorum(
        self, attempt: GroupAttempt, found: TopologyAttempt, placed: list[Placement], progress: str
    ) -> GroupResult:
        """Revert ``placed``; a gang may preempt for room (KEP-5710: a topology gang's
        room inside one domain; a composite would preempt at its root only, which is
        not done yet)."""
        self.placer.revert(attempt.fwk, placed)
        result = GroupResult(
            "rejected",
            tuple(placed),
            tuple(found.failures),
            shortfall=found.shortfall,
            progress=progress,
        )
        if attempt.policy.tree is not None or result.error:
            return result
        preemption = self.preemption.attempt(attempt)
        waiting = preemption is not None and preemption.result in ("preempted", "waiting")
        return dataclasses.replace(
            result, outcome="waiting" if waiting else "rejected", preemption=preemption
        )
