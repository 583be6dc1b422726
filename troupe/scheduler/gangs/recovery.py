"""Gangs left partly bound: finish them first, or release what they hold.

troupe never starts binding a gang below its quorum, but binding N pods is not
atomic: a replica killed in the middle of a gang's bindings, a binding refused for
good, or a node deleted under members not bound yet leaves a gang with
``0 < bound < minCount``. Its bound members hold resources they cannot use (a gang
member alone does no work) and block other gangs.

``GangRecovery.sweep`` runs from the loop's housekeeping (once a second, so also
right after start-up) and finds such gangs: a gang with members bound, fewer than
its ``minCount``, no binding of it in flight, no member finished (a gang with a
Succeeded or Failed member has run), and pending members that were created before
its members were bound — they were meant to start together. A pending member
created after the others were bound is a replacement of a lost pod, not a gang left
partly bound by a scheduler, and is scheduled as a late member.

1. **Place the rest first.** The gang is moved to the active queue at once (skipping
   backoff) and, since it sorts by its group's creation time, is attempted before
   younger work of its priority. Its bound members count towards the quorum where
   they are (they are bound: pinned), so only the pending members are placed, all
   or nothing, as in every group cycle.
2. **Past the group's timeout** (``scheduleTimeoutSeconds``, else the profile's
   ``gangScheduleTimeoutSeconds``, counted from when troupe first saw the gang
   partly bound), the profile's ``partialGangPolicy`` applies:

   - ``Evict`` (default): every bound member is evicted through the Eviction API,
     so PodDisruptionBudgets are respected (a member a budget protects is retried
     every ``retry_interval``), with a ``GangPartiallyBound`` event on the group and
     on each member. While its evictions run, the group is not scheduled, so no
     placement counts a member being evicted. The controller that owns the pods
     recreates them and the gang starts over whole.
   - ``Keep``: the bound members stay; the group and its pending members are told
     (event, condition), once per timeout period.

``troupe_partial_gangs`` counts such gangs now, ``troupe_partial_gang_outcomes_total``
what became of them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final, Protocol

import structlog

from troupe.api.client import ApiError, SchedulerClient
from troupe.api.clock import Clock
from troupe.api.gangapi import parse_time
from troupe.api.gangs import GangPolicy, GroupKey, GroupRef
from troupe.api.objects import Pod, PodKey
from troupe.api.tasks import TaskSupervisor
from troupe.queue.entity import QueuedGroupInfo
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cache import Cache
from troupe.scheduler.gangs import composite_quorum
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.gangs.report import REASON_UNSCHEDULABLE, GangReporter
from troupe.scheduler.observe.metrics import SchedulerMetrics

log = structlog.get_logger("troupe.gang.recovery")

REASON_PARTIAL: Final = "GangPartiallyBound"
EVICT: Final = "Evict"
KEEP: Final = "Keep"
# How soon evictions a PodDisruptionBudget refused (or an API error failed) are retried.
RETRY_INTERVAL: Final = 10.0


class PolicyOf(Protocol):
    def __call__(self, scheduler_name: str) -> str | None:
        """The ``partialGangPolicy`` of the profile named, None if not ours."""


@dataclass(slots=True)
class _Partial:
    since: float  # clock time troupe first saw the gang partly bound
    profile: str
    policy: str
    acted_at: float | None = None  # when the policy was last applied
    evicting: bool = False


@dataclass(eq=False, kw_only=True)
class GangRecovery:
    clock: Clock
    queue: SchedulingQueue
    cache: Cache
    groups: GangDirectory
    report: GangReporter
    client: SchedulerClient
    tasks: TaskSupervisor
    policy_of: PolicyOf
    default_timeout: float
    metrics: SchedulerMetrics | None = None
    retry_interval: float = RETRY_INTERVAL

    def __post_init__(self) -> None:
        self._partial: dict[GroupKey, _Partial] = {}

    def holds(self, key: GroupKey) -> bool:
        """Whether the group must not be scheduled now (its bound members are being
        evicted)."""
        state = self._partial.get(key)
        return state is not None and state.evicting

    def partial(self) -> list[GroupKey]:
        """The gangs partly bound as of the last sweep."""
        return sorted(self._partial)

    def sweep(self) -> None:
        now = self.clock.now()
        seen: set[GroupKey] = set()
        for key in self.groups.placed_groups():
            if self.queue.where_group(key) == "in_flight" or self.holds(key):
                if key in self._partial:
                    seen.add(key)
                continue
            found = self._partly_bound(key)
            if found is None:
                continue
            entity, policy, bound = found
            seen.add(key)
            state = self._partial.get(key)
            if state is None:
                state = self._first_seen(entity, policy, bound, now)
                if state is None:
                    seen.discard(key)
                    continue
            self._act(entity, policy, bound, state, now)
        for key in list(self._partial):
            if key not in seen:
                self._resolved(key)
        if self.metrics is not None:
            counts: dict[tuple[str, str], int] = {}
            for state in self._partial.values():
                labels = (state.profile, state.policy)
                counts[labels] = counts.get(labels, 0) + 1
            self.metrics.partial_gangs_now(counts)

    # --- finding them --------------------------------------------------------------------

    def _partly_bound(self, key: GroupKey) -> tuple[QueuedGroupInfo, GangPolicy, list[Pod]] | None:
        """The gang's pending entity, policy and bound members if it is partly bound."""
        entity = self.queue.get_group(key)
        if entity is None or not entity.members:
            return None
        ref = entity.ref
        policy = self.groups.policy(ref)
        if policy is None or not policy.gang or self.groups.problem(ref) is not None:
            return None
        if self.groups.finished_count(key):
            return None  # a member ran to completion: the gang has run
        placed = self.groups.placed_members(key)
        if not placed or self._complete(policy, placed):
            return None
        bound: list[Pod] = []
        for member in placed:
            info = self.cache.info_of(member)
            if info is None or self.cache.is_assumed(member):
                return None  # a binding of the gang is in flight: it is being admitted
            bound.append(info.pod)
        bound_at = [t for t in map(_bound_at, bound) if t > 0]
        if not bound_at:
            return None  # bound by something other than a scheduler's binding
        first_bound = min(bound_at)
        if not any(
            parse_time(m.pod.metadata.creation_timestamp) <= first_bound
            for m in entity.members.values()
        ):
            return None  # only replacements created after the gang was bound
        return entity, policy, bound

    def _complete(self, policy: GangPolicy, placed: set[PodKey]) -> bool:
        """The bound members make the gang whole: ``minCount`` of them, or for a
        CompositePodGroup every PodGroup at 0 or its quorum and the composite's rule met."""
        if policy.tree is None:
            return len(placed) >= policy.min_count
        return composite_quorum.complete(policy.tree, self.groups.leaf_placed(policy.tree))

    def _first_seen(
        self, entity: QueuedGroupInfo, policy: GangPolicy, bound: list[Pod], now: float
    ) -> _Partial | None:
        first = next(iter(entity.members.values()))
        profile = first.pod.spec.scheduler_name
        chosen = self.policy_of(profile)
        if chosen is None:
            return None
        state = self._partial[entity.ref.key] = _Partial(now, profile, chosen)
        timeout = self._timeout(policy)
        message = (
            f"gang {entity.ref.display}: {len(bound)} of {policy.min_count} required pods "
            f"bound and {len(entity.members)} pending; placing the pending members first; "
        )
        if chosen == EVICT:
            message += (
                f"if the gang is not complete within {timeout:g}s its bound members are "
                "evicted so it can start over whole (partialGangPolicy: Evict)"
            )
        else:
            message += (
                f"if the gang is not complete within {timeout:g}s its bound members are "
                "kept (partialGangPolicy: Keep)"
            )
        self.report.warning(entity.ref, REASON_PARTIAL, "Recovering", message)
        log.warning(
            "gang partly bound",
            group=entity.ref.key,
            bound=len(bound),
            pending=len(entity.members),
            minCount=policy.min_count,
            policy=chosen,
        )
        # Place the rest first: no waiting out a backoff.
        self.queue.activate([next(iter(entity.members))])
        return state

    def _timeout(self, policy: GangPolicy) -> float:
        return float(policy.timeout_seconds or self.default_timeout)

    # --- past the timeout ----------------------------------------------------------------

    def _act(
        self,
        entity: QueuedGroupInfo,
        policy: GangPolicy,
        bound: list[Pod],
        state: _Partial,
        now: float,
    ) -> None:
        timeout = self._timeout(policy)
        if now - state.since < timeout:
            return
        if state.policy == EVICT:
            bound = [pod for pod in bound if not pod.metadata.deletion_timestamp]
            if bound and (state.acted_at is None or now - state.acted_at >= self.retry_interval):
                self._evict(entity, policy, bound, state, timeout)
            return
        if state.acted_at is not None and now - state.acted_at < timeout:
            return
        state.acted_at = now
        message = (
            f"gang {entity.ref.display}: {len(bound)} of {policy.min_count} required pods "
            f"bound; the rest could not be placed within {timeout:g}s; the bound members "
            "are kept and hold their resources (partialGangPolicy: Keep)"
        )
        self._tell(entity, message)
        if self.metrics is not None:
            self.metrics.partial_gang_outcome("kept")

    def _tell(self, entity: QueuedGroupInfo, message: str) -> None:
        self.report.warning(entity.ref, REASON_PARTIAL, "Scheduling", message)
        self.report.group_condition(entity.ref, "Unschedulable", message)
        for info in entity.members.values():
            self.report.pod(info, REASON_UNSCHEDULABLE, message, event=False)

    def _evict(
        self,
        entity: QueuedGroupInfo,
        policy: GangPolicy,
        bound: list[Pod],
        state: _Partial,
        timeout: float,
    ) -> None:
        ref = entity.ref
        message = (
            f"gang {ref.display}: {len(bound)} of {policy.min_count} required pods bound; "
            f"the rest could not be placed within {timeout:g}s; evicting the bound "
            "members so the gang can start over whole (partialGangPolicy: Evict)"
        )
        if state.acted_at is None:
            self._tell(entity, message)
        state.evicting = True
        state.acted_at = self.clock.now()
        self.tasks.spawn(self._evict_all(ref, bound, state, message), name=f"evict {ref.key}")

    async def _evict_all(
        self, ref: GroupRef, bound: list[Pod], state: _Partial, message: str
    ) -> None:
        refused: list[str] = []
        try:
            results = await asyncio.gather(
                *(self._evict_one(pod, message) for pod in bound), return_exceptions=True
            )
            for pod, result in zip(bound, results, strict=True):
                if isinstance(result, BaseException):
                    refused.append(f"{pod.metadata.name}: {_why(result)}")
        finally:
            state.evicting = False
        if refused:
            log.warning("partly bound gang: evictions refused", group=ref.key, refused=refused)
            self.report.warning(
                ref,
                REASON_PARTIAL,
                "Evicting",
                f"gang {ref.display}: could not evict {len(refused)} bound member(s), "
                f"retrying in {self.retry_interval:g}s: " + "; ".join(refused[:5]),
            )
        elif self.metrics is not None:
            self.metrics.partial_gang_outcome("evicted")
        log.warning("partly bound gang evicted", group=ref.key, evicted=len(bound) - len(refused))

    async def _evict_one(self, pod: Pod, message: str) -> None:
        if self.cache.uid_of(pod.key) != pod.metadata.uid or pod.metadata.deletion_timestamp:
            return  # gone, replaced or already being deleted meanwhile
        if await self.client.evict_pod(pod):
            self.report.pod_warning(pod, REASON_PARTIAL, "Evicting", message)

    def _resolved(self, key: GroupKey) -> None:
        """The gang is no longer partly bound: completed, evicted or gone."""
        state = self._partial.pop(key)
        if self.metrics is None:
            return
        if len(self.groups.placed_members(key)) and state.acted_at is None:
            self.metrics.partial_gang_outcome("completed")


def _bound_at(pod: Pod) -> float:
    """When the pod was bound: its ``PodScheduled=True`` condition's transition time."""
    for condition in pod.status.conditions:
        if condition.type == "PodScheduled" and condition.status == "True":
            return parse_time(condition.last_transition_time)
    return 0.0


def _why(exc: BaseException) -> str:
    if isinstance(exc, ApiError) and exc.status == 429:
        return "a PodDisruptionBudget does not allow it now"
    return str(exc) or type(exc).__name__
