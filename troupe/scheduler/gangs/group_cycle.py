"""The pod-group cycle: place a whole gang in one cycle, all or nothing.

KEP-4671 Beta "Workload Scheduling Cycle", done in one step: ``GroupCycle.run``
takes a popped group entity and, on the live NodeTable (one snapshot: the cycle
does not yield until it has decided),

1. checks the group's ``minResources`` against the cluster's free capacity;
2. places members largest first (identical members one after another), each with
   the ordinary pod algorithm, assuming and reserving each placement at once so the
   next member sees the capacity taken and the gang's own pods for affinity/spread;
3. counts: members already bound or assumed + placed now >= ``minCount``?
   - no: every placement of this attempt is unreserved and forgotten in reverse
     order, nothing was bound and nothing stays held; members that would fit get
     ``PodScheduled=False/CoschedulingNotMeetMinMember`` (KEP-3370, so autoscalers do
     not scale up for them), the others ``Unschedulable``; one ``FailedScheduling``
     event on the group and its pods; the group goes back to the queue;
   - yes: Permit runs for every placed member, and all of them go to the binding
     cycle together; members that did not fit go back as the group's remainder.

   Below quorum, before the group goes back, a gang that outranks running pods may
   preempt as a whole (``troupe.scheduler.gangs.preemption``, KEP-5710): victims are
   evicted only if the whole gang then fits, and the attempt counts as
   ``waiting_on_preemption``.

Binding N pods is not atomic in Kubernetes. troupe never starts binding a gang
unless its quorum is placed; if a binding then fails for good (the API refuses it)
and the group falls below quorum, members whose binding has not been posted yet
are released and the group is retried (docs/gangs.md, "What troupe guarantees").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
import structlog

from troupe.api.client import ApiError
from troupe.api.cycle import CycleState
from troupe.api.events import ASSIGNED_POD_DELETE
from troupe.api.framework import Diagnosis
from troupe.api.gangs import GangPolicy, GroupRef
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.queue.entity import QueuedGroupInfo
from troupe.scheduler.cycle.batch_placer import BatchPlacer, runs
from troupe.scheduler.cycle.failure import failure_message
from troupe.scheduler.cycle.results import CycleFailure, ScheduleResult
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.gangs.preemption import GangPreemption, PreemptionOutcome
from troupe.scheduler.gangs.report import (
    REASON_NOT_MEET_MIN_MEMBER,
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    GangReporter,
)

if TYPE_CHECKING:
    from troupe.scheduler.loop.schedule_one import Scheduler

log = structlog.get_logger("troupe.gang")

Failure = tuple[PodInfo, Status, Diagnosis | None]


def member_order(members: list[PodInfo]) -> list[PodInfo]:
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


@dataclass(slots=True)
class Placement:
    info: PodInfo
    state: CycleState
    result: ScheduleResult


@dataclass(slots=True)
class Admission:
    """A gang admitted to binding; broken if it falls below quorum meanwhile."""

    entity: QueuedGroupInfo
    cycle: int
    min_count: int
    broken: str = ""
    # The break was an API error (not a member deleted or bound elsewhere).
    error: bool = False
    unposted: set[str] = field(default_factory=set)
    # Members whose binding failed or was called off: requeued together, with
    # backoff, once every member's binding has settled.
    released: list[str] = field(default_factory=list)

    @property
    def ref(self) -> GroupRef:
        return self.entity.ref


class GroupCycle:
    def __init__(self, scheduler: Scheduler, batching: bool = True) -> None:
        self.s = scheduler
        # Place runs of identical members as a batch (troupe.scheduler.cycle.batch_placer).
        self.batching = batching
        self.report = GangReporter(scheduler)
        self.preemption = GangPreemption(scheduler, self.place_quorum)

    # --- the cycle -------------------------------------------------------------------

    async def run(self, fwk: Framework, entity: QueuedGroupInfo, cycle: int) -> None:
        s = self.s
        start = time.perf_counter()
        ref = entity.ref
        policy = s.groups.policy(ref)
        members = member_order(list(entity.members.values()))
        if policy is None or not members:
            # The group object went away meanwhile: back to the gated pool.
            s.queue.add_unschedulable_if_not_present(entity, cycle)
            return
        # Members bound or assumed before this attempt (the cache reports this
        # attempt's assumptions to the directory too: count before placing).
        already = s.groups.placed_count(ref.key)
        placed, failures, shortfall = self._place(fwk, ref, policy, members, already)
        quorum = not policy.gang or already + len(placed) >= policy.min_count
        if shortfall or not quorum or not placed:
            # Below quorum, or (late members of a gang that has its quorum) none fit.
            for p in reversed(placed):
                s.revert(fwk, p.state, p.info, p.result.node)
            preemption = None
            if not any(st.code is Code.ERROR for _, st, _ in failures):
                # KEP-5710: make room for the whole gang, or evict nothing.
                preemption = self.preemption.attempt(fwk, entity, policy, members, already)
            self._reject(
                fwk,
                entity,
                policy,
                already,
                placed,
                failures,
                shortfall,
                start,
                cycle,
                preemption=preemption,
            )
            return
        # Run "permit" plugins for every placed member; a rejection fails the gang.
        for p in placed:
            status = fwk.run_permit(p.state, p.info, p.result.node, s.waiting)
            if not (status.is_success or status.is_wait):
                for q in reversed(placed):
                    s.revert(fwk, q.state, q.info, q.result.node)
                why = f"{p.info.key} rejected at Permit: {failure_message(status, None)}"
                failure: Failure = (p.info, status, None)
                self._reject(fwk, entity, policy, already, placed, [failure], "", start, cycle, why)
                return
        s.stats.group_attempt("scheduled", fwk.name, time.perf_counter() - start)
        self.preemption.forget(ref.key)
        placed_keys = {p.info.key for p in placed}
        remainder = [k for k in entity.members if k not in placed_keys]
        if remainder:
            plugins = set().union(*(self._plugins(st, d) for _, st, d in failures))
            s.queue.requeue_group_remainder(entity, remainder, cycle, unschedulable_plugins=plugins)
            self._report_remainder(ref, policy, already + len(placed), failures)
        else:
            s.queue.done(entity.key)
        log.debug(
            "gang admitted",
            group=ref.key,
            placed=len(placed),
            bound_before=already,
            minCount=policy.min_count,
        )
        admission = Admission(
            entity, cycle, policy.min_count, unposted={p.info.key for p in placed}
        )
        for p in placed:
            await s.bindings.acquire()
            s.bindings.spawn(
                self._bind_member(fwk, p, start, admission), name=f"bind {p.info.key}", held=True
            )

    def _place(
        self,
        fwk: Framework,
        ref: GroupRef,
        policy: GangPolicy,
        members: list[PodInfo],
        already: int,
    ) -> tuple[list[Placement], list[Failure], str]:
        """Place what fits; returns (placements, failures, minResources shortfall)."""
        s = self.s
        shortfall = self._min_resources_shortfall(ref, policy, already)
        placed: list[Placement] = []
        failures: list[Failure] = []
        if shortfall:
            return placed, failures, shortfall
        # Existing pods' anti-affinity may tell members apart by their labels.
        with_labels = bool(s.cache.table.affinity_pods)
        for run in runs(members, with_labels):
            i = 0
            batchable = self.batching
            while i < len(run):
                if batchable and len(run) - i >= 2:
                    done, batchable = self._place_batch(fwk, run[i:], placed, failures)
                    i += done
                    if i >= len(run):
                        break
                info = run[i]
                i += 1
                state = s.new_cycle_state()
                result = s.schedule_pod(fwk, state, info)
                if isinstance(result, CycleFailure):
                    # Identical members fail identically: no need to try the rest.
                    for same in [info, *run[i:]]:
                        failures.append((same, result.status, result.diagnosis))
                    break
                self._reserve(fwk, Placement(info, state, result), placed, failures)
        return placed, failures, ""

    def place_quorum(
        self,
        fwk: Framework,
        entity: QueuedGroupInfo,
        policy: GangPolicy,
        members: list[PodInfo],
        already: int,
    ) -> dict[str, str] | None:
        """Where the members would go as the table stands ({member key: node}), if
        that reaches the quorum; None if not. Nothing stays placed (the preemption dry
        run, ``troupe.scheduler.gangs.preemption``)."""
        placed, _, shortfall = self._place(fwk, entity.ref, policy, members, already)
        try:
            if shortfall or already + len(placed) < policy.min_count:
                return None
            return {p.info.key: p.result.node for p in placed}
        finally:
            for p in reversed(placed):
                self.s.revert(fwk, p.state, p.info, p.result.node)

    def _place_batch(
        self,
        fwk: Framework,
        run: list[PodInfo],
        placed: list[Placement],
        failures: list[Failure],
    ) -> tuple[int, bool]:
        """Place members of ``run`` as a batch while candidates last: (how many it
        placed, whether batching applies to this run at all)."""
        batch = BatchPlacer(self.s, fwk)
        if not batch.start(run[0]):
            return 0, False
        done = 0
        for info in run:
            got = batch.place(info)
            if got is None:
                break
            result, state = got
            done += 1
            self._reserve(fwk, Placement(info, state, result), placed, failures, assumed=True)
        return done, True

    def _reserve(
        self,
        fwk: Framework,
        p: Placement,
        placed: list[Placement],
        failures: list[Failure],
        assumed: bool = False,
    ) -> None:
        s = self.s
        if not assumed:
            s.cache.assume(p.info, p.result.node)
        # Run "reserve" plugins.
        status = fwk.run_reserve(p.state, p.info, p.result.node)
        if not status.is_success:
            s.revert(fwk, p.state, p.info, p.result.node)
            failures.append((p.info, status, None))
            return
        placed.append(p)

    def _min_resources_shortfall(self, ref: GroupRef, policy: GangPolicy, already: int) -> str:
        """scheduler-plugins ``CheckClusterResource``: the cluster's free capacity plus
        what the group's own bound and assumed members hold must cover
        ``minResources``. A group that already has its quorum is not checked again
        (scheduler-plugins skips the check for a permitted group): its late members
        are scheduled like the rest of a running gang."""
        if not policy.min_resources or already >= policy.min_count:
            return ""
        s = self.s
        table = s.cache.table
        present = table.present
        held: dict[str, int] = {}
        for key in s.groups.placed_members(ref.key):
            info = s.cache.info_of(key)
            if info is not None:
                for resource, amount in info.requests.items():
                    held[resource] = held.get(resource, 0) + amount
        missing = []
        for resource, amount in sorted(policy.min_resources.items()):
            row = table.resource_row(resource)
            free = int(np.sum((table.allocatable[row] - table.requested[row])[present]))
            if free + held.get(resource, 0) < amount:
                missing.append(resource)
        return ", ".join(f"Insufficient {r}" for r in missing)

    # --- binding -------------------------------------------------------------------------

    async def _bind_member(
        self, fwk: Framework, p: Placement, start: float, admission: Admission
    ) -> None:
        s = self.s
        info, node = p.info, p.result.node
        if admission.broken:
            s.revert(fwk, p.state, info, node)
            self.report.pod(info, REASON_UNSCHEDULABLE, admission.broken)
            self._settled(admission, info.key, released=True)
            return
        status = await s.bind_steps(fwk, p.state, info, node)
        if status.is_success:
            s.bound(fwk, p.state, info, p.result, start)
            self._settled(admission, info.key, released=False)
            return
        s.revert(fwk, p.state, info, node)
        s.queue.on_event(ASSIGNED_POD_DELETE, info.pod, None)
        error = status.error
        gone = isinstance(error, ApiError) and (error.is_conflict or error.is_not_found)
        log.warning(
            "gang member binding failed",
            pod=info.key,
            group=admission.ref.key,
            node=node,
            error=status.message,
        )
        placed = s.groups.placed_count(admission.ref.key)
        if placed < admission.min_count and not admission.broken:
            admission.broken = (
                f"gang {admission.ref.display}: binding {info.key} failed ({status.message}); "
                f"{placed} of {admission.min_count} required pods remain placed, "
                "the rest of the gang is released and retried"
            )
            admission.error = not gone
        if not gone:
            self.report.pod(info, REASON_SCHEDULER_ERROR, f"binding failed: {status.message}")
        # Bound elsewhere or deleted: the informer reports it; never bind it again.
        self._settled(admission, info.key, released=not gone)

    def _settled(self, admission: Admission, key: str, *, released: bool) -> None:
        admission.unposted.discard(key)
        if released:
            admission.released.append(key)
        if admission.unposted:
            return
        ref = admission.ref
        # KEP-5832: PodGroupScheduled=True once the gang's bindings are done.
        if admission.broken:
            outcome: Literal["SchedulerError", "Unschedulable"] = (
                "SchedulerError" if admission.error else "Unschedulable"
            )
            self.report.group_condition(ref, outcome, admission.broken)
        else:
            placed = self.s.groups.placed_count(ref.key)
            self.report.group_condition(
                ref,
                "Scheduled",
                f"gang {ref.display}: {placed} of {admission.min_count} required pods placed",
            )
        if admission.released:
            self.s.queue.requeue_group_remainder(
                admission.entity, admission.released, admission.cycle, unschedulable_plugins=set()
            )

    # --- telling the user ------------------------------------------------------------------

    @staticmethod
    def _plugins(status: Status, diagnosis: Diagnosis | None) -> set[str]:
        plugins = set(diagnosis.unschedulable_plugins) if diagnosis is not None else set()
        if status.plugin:
            plugins.add(status.plugin)
        return plugins

    def _reject(
        self,
        fwk: Framework,
        entity: QueuedGroupInfo,
        policy: GangPolicy,
        already: int,
        placed: list[Placement],
        failures: list[Failure],
        shortfall: str,
        start: float,
        cycle: int,
        why: str = "",
        preemption: PreemptionOutcome | None = None,
    ) -> None:
        """End an attempt whose placements were all reverted: tell the members and the
        group why (and what preemption did for it), and hand the group back to the
        queue."""
        s = self.s
        ref = entity.ref
        error = any(status.code is Code.ERROR for _, status, _ in failures)
        if not why:
            if shortfall:
                why = f"the cluster does not have the group's minResources free: {shortfall}"
            elif failures:
                why = failures_message(failures)
            else:
                why = "not enough members"
        if already >= policy.min_count:
            # Late members of a gang that has its quorum, none of which fit.
            state = f"{already} of {policy.min_count} required pods placed"
        else:
            state = f"{already + len(placed)} of {policy.min_count} required pods fit"
        message = f"gang {ref.display}: {state}; {why}"
        if preemption is not None:
            message += f"; {preemption.message}"
        nominated = preemption.plan.nominated if preemption and preemption.plan else {}
        plugins: set[str] = set()
        for _, status, diagnosis in failures:
            plugins |= self._plugins(status, diagnosis)
        # An internal error: retried after backoff, whatever the events (as a pod).
        entity.unschedulable_plugins = set() if error else plugins
        failed = {info.key: status for info, status, _ in failures}
        for info in entity.members.values():
            failure = failed.get(info.key)
            if failure is None:
                reason = REASON_NOT_MEET_MIN_MEMBER
            elif failure.code is Code.ERROR:
                reason = REASON_SCHEDULER_ERROR
            else:
                reason = REASON_UNSCHEDULABLE
            self.report.pod(info, reason, message, nominated_node_name=nominated.get(info.key))
        self.report.group_event(ref, message)
        self.report.group_condition(ref, "SchedulerError" if error else "Unschedulable", message)
        result = "error" if error else "unschedulable"
        if preemption is not None and preemption.result in ("preempted", "waiting"):
            result = "waiting_on_preemption"
        s.stats.group_attempt(result, fwk.name, time.perf_counter() - start)
        if error:
            log.error("error scheduling gang", group=ref.key, message=message, profile=fwk.name)
        else:
            log.debug("gang rejected", group=ref.key, message=message, profile=fwk.name)
        s.queue.add_unschedulable_if_not_present(entity, cycle)

    def _report_remainder(
        self, ref: GroupRef, policy: GangPolicy, placed: int, failures: list[Failure]
    ) -> None:
        """Members beyond the quorum that did not fit: the gang goes ahead without
        them for now, and they say why."""
        if not failures:
            return
        message = (
            f"gang {ref.display}: {placed} of {policy.min_count} required pods placed; "
            f"{failures_message(failures)}"
        )
        for info, status, _ in failures:
            reason = REASON_SCHEDULER_ERROR if status.code is Code.ERROR else REASON_UNSCHEDULABLE
            self.report.pod(info, reason, message)


def failures_message(failures: list[Failure]) -> str:
    """Why members did not fit, over all of them: one member's reasons when every
    member failed alike, else each distinct reason with how many members it stopped
    (most first)."""
    counts: dict[str, int] = {}
    for _, status, diagnosis in failures:
        text = failure_message(status, diagnosis)
        counts[text] = counts.get(text, 0) + 1
    if len(counts) == 1:
        (text,) = counts
        return text
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return "; ".join(f"{n} pod(s): {text}" for text, n in ranked)
