"""Where a gang's members go: placed one after another on the live NodeTable.

``GangPlacer.place`` is step 1 and 2 of the group cycle
(``troupe.scheduler.gangs.group_cycle``):

1. ``minResources`` (scheduler-plugins ``CheckClusterResource``): the cluster's free
   capacity plus what the group's own bound and assumed members hold must cover it;
2. members largest first, identical members one after another (``member_order``),
   each with the per-pod algorithm (``troupe.scheduler.cycle.algorithm``), assumed
   and reserved at once so the next member sees the capacity taken and the gang's
   own pods for affinity and spread. A run of identical members whose plugins are
   node-local is placed as a batch (``troupe.scheduler.cycle.batch_placer``,
   KEP-5598); identical members fail identically, so a run stops at its first
   failure.

What it places stays placed (assumed and reserved) for the caller to admit or
revert. Every member's cycle state reaches the attempt's shared area
(``GroupAttempt.group``), and the nodes a member may take (a placement's, KEP-5732)
are passed down as an argument, never remembered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from troupe.api.cycle import CycleState
from troupe.api.nodetable import BoolArray, summable
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.scheduler.cycle.algorithm import PodAlgorithm, pre_filter_mask
from troupe.scheduler.cycle.batch_placer import BatchPlacer, runs
from troupe.scheduler.cycle.results import CycleFailure, ScheduleResult
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.gangs.attempt import Failure, GroupAttempt, Placement
from troupe.scheduler.gangs.directory import GangDirectory

_NO_NODE = Status.unschedulable("no node named for it")


def member_order(members: Sequence[PodInfo]) -> list[PodInfo]:
    """Largest requests first; identical members adjacent (KEP-4671 signatures)."""
    return sorted(
        members,
        key=lambda p: (
            -p.requests.get("cpu", 0),
            -p.requests.get("memory", 0),
            tuple(sorted(p.requests.items())),
            p.key,
        ),
    )


class GangPlacer:
    def __init__(
        self, algorithm: PodAlgorithm, groups: GangDirectory, *, batching: bool = True
    ) -> None:
        self.algorithm = algorithm
        self.cache = algorithm.cache
        self.groups = groups
        # Place runs of identical members as a batch (troupe.scheduler.cycle.batch_placer).
        self.batching = batching

    def place(self, attempt: GroupAttempt) -> tuple[list[Placement], list[Failure], str]:
        """Place what fits; returns (placements, failures, minResources shortfall)."""
        shortfall = self.min_resources_shortfall(attempt)
        if shortfall:
            return [], [], shortfall
        placed, failures = self.place_within(attempt, attempt.members, None)
        return placed, failures, ""

    def place_within(
        self,
        attempt: GroupAttempt,
        members: Sequence[PodInfo],
        nodes: BoolArray | None,
        quorum: tuple[int, int] | None = None,
    ) -> tuple[list[Placement], list[Failure]]:
        """Place what fits of ``members`` on ``nodes`` (a placement's mask; None:
        every node).

        ``quorum`` = (minCount, members counted before): PlacementFeasible is asked
        after every member that does not fit, and the evaluation stops once the
        quorum can no longer be reached (KEP-5732 beta early rejection)."""
        placed: list[Placement] = []
        failures: list[Failure] = []
        try:
            rest = self._place_nominated(attempt, members, nodes, placed, failures)
            self._place_members(attempt, rest, nodes, placed, failures, quorum)
        except BaseException:
            # Nothing of a failed attempt stays placed.
            self.revert(attempt.fwk, placed)
            raise
        return placed, failures

    def _place_members(
        self,
        attempt: GroupAttempt,
        members: list[PodInfo],
        nodes: BoolArray | None,
        placed: list[Placement],
        failures: list[Failure],
        quorum: tuple[int, int] | None,
    ) -> None:
        fwk = attempt.fwk
        # Existing pods' anti-affinity may tell members apart by their labels.
        with_labels = bool(self.cache.table.affinity_pods)
        tried = 0
        for run in runs(members, with_labels):
            tried += len(run)
            if quorum is not None and failures:
                min_count, before = quorum
                remaining = len(members) - tried + len(run)
                status = fwk.group.run_placement_feasible(
                    min_count, before + len(placed), remaining
                )
                if status.is_rejected:
                    return
            i = 0
            batchable = self.batching
            while i < len(run):
                if batchable and len(run) - i >= 2:
                    done, batchable = self._place_batch(attempt, run[i:], nodes, placed, failures)
                    i += done
                    if i >= len(run):
                        break
                info = run[i]
                i += 1
                state = self.algorithm.new_cycle_state(attempt.group)
                result = self.algorithm.schedule_pod(fwk, state, info, nodes)
                if isinstance(result, CycleFailure):
                    # Identical members fail identically: no need to try the rest.
                    for same in [info, *run[i:]]:
                        failures.append((same, result.status, result.diagnosis))
                    break
                self._reserve(fwk, Placement(info, state, result), placed, failures)

    def _place_nominated(
        self,
        attempt: GroupAttempt,
        members: Sequence[PodInfo],
        nodes: BoolArray | None,
        placed: list[Placement],
        failures: list[Failure],
    ) -> list[PodInfo]:
        """Members a preemption nominated go to their node first when they still fit
        there (upstream's nominated-node shortcut): the gang binds on the room its
        victims left, not on room it did not pay for. Returns the others."""
        node_of = self.algorithm.nominated_node
        missed = self._place_on(attempt, members, node_of, nodes, placed, failures)
        return [info for info, _ in missed]

    def place_held(
        self, attempt: GroupAttempt, nodes: Mapping[str, str]
    ) -> tuple[list[Placement], list[Failure]]:
        """Each member of ``nodes`` on its node, if it fits there, and nowhere else;
        members not in ``nodes`` are left alone (a gang held to the placement its
        preemption paid for, ``troupe.scheduler.gangs.preemption``)."""
        placed: list[Placement] = []
        failures: list[Failure] = []
        held = [info for info in attempt.members if info.key in nodes]
        try:
            missed = self._place_on(
                attempt, held, lambda info: nodes[info.key], None, placed, failures
            )
        except BaseException:
            self.revert(attempt.fwk, placed)
            raise
        for info, status in missed:
            if status.code is not Code.ERROR:
                status = status.wrapped("on the node its gang's preemption nominated")
            failures.append((info, status, None))
        return placed, failures

    def _place_on(
        self,
        attempt: GroupAttempt,
        members: Sequence[PodInfo],
        node_of: Callable[[PodInfo], str | None],
        within: BoolArray | None,
        placed: list[Placement],
        failures: list[Failure],
    ) -> list[tuple[PodInfo, Status]]:
        """Each member on the node ``node_of`` names for it, if it fits there (assumed
        and reserved); returns the members placed nowhere, with why."""
        missed: list[tuple[PodInfo, Status]] = []
        for info in members:
            node = node_of(info)
            if not node:
                missed.append((info, _NO_NODE))
                continue
            state, status = self._fits_on(attempt, info, node, within)
            if state is None:
                missed.append((info, status))
                continue
            result = ScheduleResult(node, 1, 1)
            self._reserve(attempt.fwk, Placement(info, state, result), placed, failures)
        return missed

    def _fits_on(
        self, attempt: GroupAttempt, info: PodInfo, node: str, within: BoolArray | None
    ) -> tuple[CycleState | None, Status]:
        """The member's cycle state if it passes PreFilter and Filter on ``node`` (and
        ``node`` is inside ``within``, the placement being tried); else None and why
        not (in words that do not name the node, so that members' reasons group)."""
        fwk, table = attempt.fwk, self.cache.table
        slot = table.slot(node)
        if slot is None or not table.present[slot]:
            return None, Status.unschedulable("the node is gone")
        if within is not None and not within[slot]:
            return None, Status.unschedulable("the node is outside the placement")
        state = self.algorithm.new_cycle_state(attempt.group)
        pre, status = fwk.run_pre_filter(state, info, table)
        if not status.is_success:
            return None, status
        allowed = pre_filter_mask(table, pre)
        if allowed is not None and not allowed[slot]:
            return None, Status.unschedulable("PreFilter leaves the node out")
        only = np.zeros(table.capacity, dtype=bool)
        only[slot] = True
        outcome = fwk.run_filter(state, info, table, only)
        if not outcome.status.is_success:
            return None, outcome.status
        if not outcome.feasible[slot]:
            plugins = [name for name, _, rejected in outcome.rejected_by if rejected[slot]]
            why = "no room there yet" + (f" ({', '.join(plugins)})" if plugins else "")
            return None, Status.unschedulable(why, plugin=plugins[0] if plugins else "")
        return state, outcome.status

    def revert(self, fwk: Framework, placed: list[Placement]) -> None:
        """Undo every placement, last first."""
        for p in reversed(placed):
            self.algorithm.revert(fwk, p.state, p.info, p.result.node)

    def _place_batch(
        self,
        attempt: GroupAttempt,
        run: list[PodInfo],
        nodes: BoolArray | None,
        placed: list[Placement],
        failures: list[Failure],
    ) -> tuple[int, bool]:
        """Place members of ``run`` as a batch while candidates last: (how many it
        placed, whether batching applies to this run at all)."""
        batch = BatchPlacer(self.algorithm, attempt.fwk, within=nodes, group=attempt.group)
        if not batch.start(run[0]):
            return 0, False
        done = 0
        for info in run:
            got = batch.place(info)
            if got is None:
                break
            result, state = got
            done += 1
            p = Placement(info, state, result)
            self._reserve(attempt.fwk, p, placed, failures, assumed=True)
        return done, True

    def _reserve(
        self,
        fwk: Framework,
        p: Placement,
        placed: list[Placement],
        failures: list[Failure],
        assumed: bool = False,
    ) -> None:
        if not assumed:
            self.cache.assume(p.info, p.result.node)
        # Run "reserve" plugins.
        status = fwk.binding.run_reserve(p.state, p.info, p.result.node)
        if not status.is_success:
            self.algorithm.revert(fwk, p.state, p.info, p.result.node)
            failures.append((p.info, status, None))
            return
        placed.append(p)

    def min_resources_shortfall(self, attempt: GroupAttempt) -> str:
        """scheduler-plugins ``CheckClusterResource``: the cluster's free capacity plus
        what the group's own bound and assumed members hold must cover
        ``minResources``. A group that already has its quorum is not checked again
        (scheduler-plugins skips the check for a permitted group): its late members
        are scheduled like the rest of a running gang."""
        ref, policy, already = attempt.ref, attempt.policy, attempt.already
        if not policy.min_resources or already >= policy.min_count:
            return ""
        table = self.cache.table
        present = table.present
        held: dict[str, int] = {}
        for key in self.groups.placed_members(ref.key):
            info = self.cache.info_of(key)
            if info is not None:
                for resource, amount in info.requests.items():
                    held[resource] = held.get(resource, 0) + amount
        missing = []
        for resource, amount in sorted(policy.min_resources.items()):
            row = table.resource_row(resource)
            free = int(summable((table.allocatable[row] - table.requested[row])[present]).sum())
            if free + held.get(resource, 0) < amount:
                missing.append(resource)
        return ", ".join(f"Insufficient {r}" for r in missing)
