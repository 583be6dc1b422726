"""The pod-group cycle: place a whole gang in one cycle, all or nothing.

KEP-4671 Beta "Workload Scheduling Cycle", done in one step: ``GroupCycle.run``
takes a popped group entity and, on the live NodeTable (one snapshot: the cycle
does not yield until it has decided),

1. checks the group's ``minResources`` against the cluster's free capacity, and
2. places members largest first (identical members one after another), each with
   the ordinary pod algorithm, assuming and reserving each placement at once so the
   next member sees the capacity taken and the gang's own pods for affinity/spread
   (both in ``troupe.scheduler.gangs.placement``);
3. counts: members already bound or assumed + placed now >= ``minCount``?
   - no: every placement of this attempt is unreserved and forgotten in reverse
     order, nothing was bound and nothing stays held; members that would fit get
     ``PodScheduled=False/CoschedulingNotMeetMinMember`` (KEP-3370, so autoscalers do
     not scale up for them), the others ``Unschedulable``; one ``FailedScheduling``
     event on the group and its pods; the group goes back to the queue;
   - yes: Permit runs for every placed member, and all of them go to the binding
     cycle together (``troupe.scheduler.gangs.admission``); members that did not
     fit go back as the group's remainder.

   Below quorum, before the group goes back, a gang that outranks running pods may
   preempt as a whole (``troupe.scheduler.gangs.preemption``, KEP-5710): victims are
   evicted only if the whole gang then fits, and the attempt counts as
   ``waiting_on_preemption``. Until those victims are gone the gang is placed only
   on the nodes its preemption nominated (``GangPreemption.held_to``).

Binding N pods is not atomic in Kubernetes. troupe never starts binding a gang
unless its quorum is placed; if a binding then fails for good (the API refuses it)
and the group falls below quorum, members whose binding has not been posted yet
are released and the group is retried (docs/gangs.md, "What troupe guarantees").
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from troupe.api.framework import Diagnosis
from troupe.api.gangs import GangPolicy, GroupKey, GroupRef
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.api.tasks import BoundedSupervisor
from troupe.queue.entity import QueuedGroupInfo
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cache import Cache
from troupe.scheduler.cycle.failure import failure_message
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.framework.waiting_pods import WaitingPods
from troupe.scheduler.gangs import composite_quorum
from troupe.scheduler.gangs.admission import Admission, GangAdmission
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.gangs.placement import Failure, GangPlacer, Placement, member_order
from troupe.scheduler.gangs.preemption import GangPreemption, PreemptionOutcome
from troupe.scheduler.gangs.report import (
    REASON_NOT_MEET_MIN_MEMBER,
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    GangReporter,
)
from troupe.scheduler.gangs.topology import TopologyAttempt, TopologyPlacer
from troupe.scheduler.observe.explain import Explanations, Record, member_entry
from troupe.scheduler.observe.stats import AttemptStats

log = structlog.get_logger("troupe.gang")


class GroupCycle:
    def __init__(
        self,
        *,
        groups: GangDirectory,
        queue: SchedulingQueue,
        cache: Cache,
        placer: GangPlacer,
        topology: TopologyPlacer,
        preemption: GangPreemption,
        admission: GangAdmission,
        waiting: WaitingPods,
        bindings: BoundedSupervisor,
        stats: AttemptStats,
        report: GangReporter,
        held: Callable[[GroupKey], bool] | None = None,
        explanations: Explanations | None = None,
    ) -> None:
        self.groups = groups
        # The last failed attempt of each pending group (``troupe explain``).
        self.explanations = explanations
        # Groups that must not be scheduled now (their bound members are being
        # evicted, troupe.scheduler.gangs.recovery).
        self.held = held
        self.queue = queue
        self.cache = cache
        self.placer = placer
        self.topology = topology
        self.preemption = preemption
        self.admission = admission
        self.waiting = waiting
        self.bindings = bindings
        self.stats = stats
        self.report = report

    # --- the cycle -------------------------------------------------------------------

    async def run(self, fwk: Framework, entity: QueuedGroupInfo, cycle: int) -> None:
        """One attempt of the group; the SLI of its members follows them until bound."""
        self.stats.track_members(entity.members, entity.attempts, entity.initial_attempt_timestamp)
        await self._attempt(fwk, entity, cycle)
        for key in entity.members:
            if key not in self.cache:
                self.stats.forget_member(key)

    async def _attempt(self, fwk: Framework, entity: QueuedGroupInfo, cycle: int) -> None:
        start = time.perf_counter()
        ref = entity.ref
        policy = self.groups.policy(ref)
        # A member already placed (its binding in flight) is counted in ``already``
        # and never placed twice. A member whose name is still held by a deleted
        # pod being bound waits until that binding has settled (it fails on the UID
        # precondition), as a lone pod does in schedule_one.
        fresh: list[PodInfo] = []
        stale: list[str] = []
        for m in entity.members.values():
            cached = self.cache.uid_of(m.key)
            if cached is None:
                fresh.append(m)
            elif cached != m.pod.metadata.uid:
                stale.append(m.key)
        members = member_order(fresh)
        if policy is None or not entity.members or (self.held and self.held(ref.key)):
            # The group object went away meanwhile (back to the gated pool), or the
            # group is held: retried on the next event.
            self.queue.add_unschedulable_if_not_present(entity, cycle)
            return
        if not members:
            if stale:
                self.queue.requeue_group_remainder(entity, stale, cycle, unschedulable_plugins=())
            else:
                # Every member is placed already (bound, or its binding in flight).
                self.queue.done(entity.key, entity)
            return
        # Members bound or assumed before this attempt (the cache reports this
        # attempt's assumptions to the directory too: count before placing).
        already = self.groups.placed_count(ref.key)
        tree = policy.tree
        before = self.groups.leaf_placed(tree) if tree is not None else {}
        attempt = self._place_held(fwk, entity, policy, members, already)
        if attempt is None:
            attempt = self.topology.place(fwk, ref, policy, members, already)
        placed, failures, shortfall = attempt.placed, attempt.failures, attempt.shortfall
        held_back: list[Placement] = []
        state = attempt.state
        if tree is None:
            quorum = not policy.gang or already + len(placed) >= policy.min_count
        else:
            # KEP-6012: at least minGroupCount children at their own quorum, or nothing.
            found = composite_quorum.split(tree, before, placed)
            state = found.state
            quorum = found.kept is not None
            if found.kept is not None:
                held_back = found.held_back
                self.placer.revert(fwk, held_back)
                placed = found.kept
        if shortfall or not quorum or not placed:
            # Below quorum, or (late members of a gang that has its quorum) none fit.
            self.placer.revert(fwk, placed)
            preemption = None
            if tree is None and not any(st.code is Code.ERROR for _, st, _ in failures):
                # KEP-5710: make room for the whole gang, or evict nothing; a topology
                # gang's room inside one domain. (A composite would preempt at its
                # root only: not done yet.)
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
                state=state,
            )
            return
        # Run "permit" plugins for every placed member; a rejection fails the gang.
        for p in placed:
            status = fwk.binding.run_permit(p.state, p.info, p.result.node, self.waiting)
            if not (status.is_success or status.is_wait):
                self.placer.revert(fwk, placed)
                why = f"{p.info.key} rejected at Permit: {failure_message(status, None)}"
                failure: Failure = (p.info, status, None)
                self._reject(fwk, entity, policy, already, placed, [failure], "", start, cycle, why)
                return
        self.stats.group_attempt(
            "scheduled", fwk.name, time.perf_counter() - start, _entity_type(ref)
        )
        self.preemption.forget(ref.key)
        if self.explanations is not None:
            self.explanations.group_gone(ref.key)
        placed_keys = {p.info.key for p in placed}
        remainder = [k for k in entity.members if k not in placed_keys]
        if remainder:
            plugins = set().union(*(self._plugins(st, d) for _, st, d in failures))
            self.queue.requeue_group_remainder(
                entity, remainder, cycle, unschedulable_plugins=plugins
            )
            self._report_remainder(ref, policy, already + len(placed), failures, state)
            self._report_held_back(ref, state, held_back)
        else:
            self.queue.done(entity.key)
        log.debug(
            "gang admitted",
            group=ref.key,
            domain=attempt.domain,
            placed=len(placed),
            bound_before=already,
            minCount=policy.min_count,
        )
        admission = Admission(
            entity, cycle, policy.min_count, unposted={p.info.key for p in placed}, tree=tree
        )
        for p in placed:
            await self.bindings.acquire()
            self.admission.spawn(fwk, p, start, admission)

    def _place_held(
        self,
        fwk: Framework,
        entity: QueuedGroupInfo,
        policy: GangPolicy,
        members: list[PodInfo],
        already: int,
    ) -> TopologyAttempt | None:
        """A gang that preempted goes where its preemption nominated it: there when
        its quorum fits, else (victims still terminating) nowhere yet. None: placed as
        any gang (no hold, or the victims are gone and the nominated nodes no longer
        hold it)."""
        held = self.preemption.held_to(entity) if policy.tree is None else {}
        if not held:
            return None
        attempt = TopologyAttempt(*self.placer.place_held(fwk, members, held))
        if already + len(attempt.placed) < policy.min_count and not self.preemption.waiting(entity):
            self.placer.revert(fwk, attempt.placed)
            return None
        return attempt

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
        state: str = "",
    ) -> None:
        """End an attempt whose placements were all reverted: tell the members and the
        group why (and what preemption did for it), and hand the group back to the
        queue."""
        ref = entity.ref
        error = any(status.code is Code.ERROR for _, status, _ in failures)
        if not why:
            if shortfall:
                why = f"the cluster does not have the group's minResources free: {shortfall}"
            elif failures:
                why = failures_message(failures)
            else:
                why = "not enough members"
        # A composite's state (how many of its groups fit) comes from the caller.
        if not state and already >= policy.min_count:
            # Late members of a gang that has its quorum, none of which fit.
            state = f"{already} of {policy.min_count} required pods placed"
        elif not state:
            state = f"{already + len(placed)} of {policy.min_count} required pods fit"
        message = f"{_noun(ref)} {ref.display}: {state}; {why}"
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
        if self.explanations is not None:
            self.explanations.group_failed(
                ref.key,
                _record(entity, policy, already, placed, failures, shortfall, state, why, message)
                | {"preemption": _preemption_record(preemption)},
            )
        self.report.group_event(ref, message)
        self.report.group_condition(ref, "SchedulerError" if error else "Unschedulable", message)
        result = "error" if error else "unschedulable"
        if preemption is not None and preemption.result in ("preempted", "waiting"):
            result = "waiting_on_preemption"
        self.stats.group_attempt(result, fwk.name, time.perf_counter() - start, _entity_type(ref))
        if error:
            log.error("error scheduling gang", group=ref.key, message=message, profile=fwk.name)
        else:
            log.debug("gang rejected", group=ref.key, message=message, profile=fwk.name)
        self.queue.add_unschedulable_if_not_present(entity, cycle)

    def _report_remainder(
        self,
        ref: GroupRef,
        policy: GangPolicy,
        placed: int,
        failures: list[Failure],
        state: str = "",
    ) -> None:
        """Members beyond the quorum that did not fit: the gang goes ahead without
        them for now, and they say why."""
        if not failures:
            return
        state = state or f"{placed} of {policy.min_count} required pods placed"
        message = f"{_noun(ref)} {ref.display}: {state}; {failures_message(failures)}"
        for info, status, _ in failures:
            reason = REASON_SCHEDULER_ERROR if status.code is Code.ERROR else REASON_UNSCHEDULABLE
            self.report.pod(info, reason, message)

    def _report_held_back(self, ref: GroupRef, state: str, held_back: list[Placement]) -> None:
        """Members of a composite's leaf below its own quorum: the composite goes
        ahead with its other groups, these wait for their PodGroup's quorum."""
        for p in held_back:
            message = (
                f"{_noun(ref)} {ref.display}: {state}; the pod's PodGroup is below its "
                "own minCount, so none of its pods is bound yet"
            )
            self.report.pod(p.info, REASON_NOT_MEET_MIN_MEMBER, message)


def _record(
    entity: QueuedGroupInfo,
    policy: GangPolicy,
    already: int,
    placed: list[Placement],
    failures: list[Failure],
    shortfall: str,
    state: str,
    why: str,
    message: str,
) -> Record:
    """The structured diagnosis of a rejected attempt (``troupe explain``)."""
    ref = entity.ref
    sub = ref.pod_group + (f"/{ref.replica_key}" if ref.replica_key else "")
    failed = {info.key: (status, diagnosis) for info, status, diagnosis in failures}
    where = {p.info.key: p.result.node for p in placed}
    members: list[Record] = []
    for info in member_order(list(entity.members.values())):
        found = failed.get(info.key)
        if found is None:
            entry = member_entry(info, None, None, REASON_NOT_MEET_MIN_MEMBER, "")
            entry["fitsOn"] = where.get(info.key, "")
        else:
            status, diagnosis = found
            reason = REASON_SCHEDULER_ERROR if status.code is Code.ERROR else REASON_UNSCHEDULABLE
            entry = member_entry(
                info, status, diagnosis, reason, failure_message(status, diagnosis)
            )
        members.append(entry)
    levels = policy.topology
    return {
        "kind": "podgroup",
        "name": ref.display,
        "key": ref.key,
        "group": {
            "kind": ref.kind,
            "api": ref.api.value,
            "namespace": ref.namespace,
            "name": ref.name,
            "sub": sub,
        },
        "message": message,
        "why": why,
        "quorum": {
            "minCount": policy.min_count,
            "minCountField": ref.min_count_field,
            "alreadyPlaced": already,
            "fit": already + len(placed),
            "pending": len(entity.members),
            "state": state,
        },
        "minResourcesShortfall": shortfall,
        "topology": {"required": levels.required, "preferred": list(levels.preferred)},
        "members": members,
    }


def _preemption_record(preemption: PreemptionOutcome | None) -> Record | None:
    if preemption is None:
        return None
    plan = preemption.plan
    return {
        "result": preemption.result,
        "message": preemption.message,
        "victims": [v.key for v in plan.victims] if plan is not None else [],
        "nominated": dict(plan.nominated) if plan is not None else {},
    }


def _noun(ref: GroupRef) -> str:
    """How messages call the group: ``gang``, or ``composite`` for a CompositePodGroup."""
    return "composite" if ref.composite else "gang"


def _entity_type(ref: GroupRef) -> str:
    """Upstream's ``type`` label of the pod-group attempt metrics."""
    return "compositepodgroup" if ref.composite else "podgroup"


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
