"""Delayed, workload-aware preemption for gangs (KEP-5710).

The group cycle (``troupe.scheduler.gangs.group_cycle``) calls
``GangPreemption.attempt`` when a gang misses its quorum, after it has reverted that
attempt's placements. In the same snapshot (the cycle does not yield):

1. **Eligibility**: a gang with ``preemptionPolicy: Never`` (its own, or any member's)
   does not preempt; neither does one whose last preemption's victims are still there
   (``waiting``): it waits for them instead of evicting more.
2. **PodGroupPostFilter** (a preemption plugin, e.g. DefaultPreemption):
   the victims over the whole cluster, found with the group (and topology placement)
   algorithm through ``place``, and where every member would go.
3. **PermitDisruption**: the plan goes ahead only if every PermitDisruption plugin
   allows it; only then ``Preemptions.actuate_group`` nominates the members and
   evicts every victim, and victim groups evicted whole get ``DisruptionTarget``.
   The gang binds in a later cycle, once the victims are gone; nothing binds in this
   one.
4. **Hold**: the gang goes to the nodes its plan nominated (``held_to``) when they
   hold its quorum, and while the victims are still terminating it goes nowhere
   else: it waits. Room the evictions free elsewhere first (an ``all`` victim group
   spread over several domains), or a domain the topology score now prefers, would
   otherwise take it, and the victims on its nominated nodes would have been evicted
   for nothing. The hold ends when the gang is admitted, or at the latest the
   victims' longest grace period plus ``HOLD_SLACK_SECONDS`` after the evictions (a
   victim stuck terminating does not hold the gang forever).

See docs/preemption.md, "Gangs".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from troupe.api.cycle import CycleState
from troupe.api.framework import DisruptionPlan, GroupEvaluation, GroupPreemptor
from troupe.api.gangs import GroupKey, GroupRef
from troupe.api.preemption import NOT_ELIGIBLE_NEVER
from troupe.api.status import Code
from troupe.queue.entity import QueuedGroupInfo
from troupe.scheduler.cache import Cache
from troupe.scheduler.cycle.evictions import Preemptions
from troupe.scheduler.cycle.failure import failure_message
from troupe.scheduler.gangs.attempt import GroupAttempt, PreemptionOutcome
from troupe.scheduler.gangs.directory import GangDirectory

# How much longer than its victims' longest grace period a gang is held to its
# nominated nodes; a victim with no grace period of its own has upstream's 30 s.
HOLD_SLACK_SECONDS = 30.0
DEFAULT_GRACE_SECONDS = 30

# (member key -> node) of a placement reaching quorum, or None; and members placed.
PlaceFn = Callable[[GroupAttempt], GroupEvaluation]


@dataclass(slots=True)
class _Pending:
    """A gang's last preemption: kept until the gang is admitted, or until its hold
    has run out and its victims are gone."""

    victims: list[tuple[str, str]]  # (key, uid)
    nominated: dict[str, str]  # member key -> node
    hold_until: float  # on the monotonic clock


class GangPreemption:
    def __init__(
        self,
        *,
        preemptions: Preemptions,
        cache: Cache,
        groups: GangDirectory,
        new_cycle_state: Callable[[], CycleState],
        place: PlaceFn,
        in_place: Callable[[GroupAttempt], bool] | None = None,
        disrupted: Callable[[GroupRef, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._preemptions = preemptions
        self._cache = cache
        self._groups = groups
        self._new_cycle_state = new_cycle_state
        self._place = place
        self._in_place = in_place
        # Told of each victim group evicted as a whole (its DisruptionTarget condition).
        self._disrupted = disrupted
        self._clock = clock
        # Each gang's last preemption (``_Pending``).
        self._pending: dict[GroupKey, _Pending] = {}

    def forget(self, key: GroupKey) -> None:
        """The gang was admitted: its preemption is over."""
        self._pending.pop(key, None)
        if self._pending:
            self._sweep()

    @property
    def kept(self) -> int:
        """How many gangs' preemptions are kept (held, or victims not yet gone)."""
        return len(self._pending)

    def waiting(self, entity: QueuedGroupInfo) -> int:
        """How many victims of the gang's last preemption are still there (at least 1
        while its evictions are being sent); 0 when it may preempt again."""
        pending = self._pending.get(entity.ref.key)
        if self._preemptions.in_flight_group(entity.ref):
            return max(1, len(pending.victims) if pending is not None else 0)
        if pending is None:
            return 0
        if pending.victims:
            pending.victims = self._still_there(pending.victims)
        return len(pending.victims)

    def _still_there(self, victims: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [(k, uid) for k, uid in victims if self._cache.uid_of(k) == uid]

    def held_to(self, entity: QueuedGroupInfo) -> dict[str, str]:
        """Where the gang's last preemption nominated its members (member key ->
        node), until the gang is admitted or the hold runs out; empty when the gang
        is free to go anywhere."""
        pending = self._pending.get(entity.ref.key)
        if pending is None or self._clock() >= pending.hold_until:
            return {}
        return pending.nominated

    def _sweep(self) -> None:
        """Forget preemptions whose hold ran out and whose victims are gone (a gang
        deleted before it was admitted is never asked again)."""
        now = self._clock()
        for key, pending in list(self._pending.items()):
            if now >= pending.hold_until and not self._still_there(pending.victims):
                del self._pending[key]

    def attempt(self, attempt: GroupAttempt) -> PreemptionOutcome | None:
        """Preempt for a gang below quorum if that makes the whole gang fit; None when
        it has nothing it could evict (or fits without evicting)."""
        fwk, entity, policy, members = attempt.fwk, attempt.entity, attempt.policy, attempt.members
        if not policy.gang or attempt.already >= policy.min_count or not fwk.pod_group_post_filter:
            return None
        if policy.preemption_policy == "Never" or any(
            m.pod.spec.preemption_policy == "Never" for m in members
        ):
            return PreemptionOutcome("never", f"preemption: {NOT_ELIGIBLE_NEVER}")
        left = self.waiting(entity)
        if left:
            return PreemptionOutcome(
                "waiting", f"preemption: waiting for {left} preempted pod(s) to terminate"
            )
        start = time.perf_counter()
        preemptor = GroupPreemptor(
            entity.ref.key,
            entity.priority,
            policy.min_count,
            {m.key: m for m in members},
            attempt.already,
            in_place=self._in_place(attempt) if self._in_place is not None else False,
        )
        # Run "podGroupPostFilter" plugins (DefaultPreemption).
        plan, status = fwk.group.run_pod_group_post_filter(preemptor, lambda: self._place(attempt))
        seconds = time.perf_counter() - start
        if status.code is Code.ERROR:
            self._preemptions.workload_attempt("error", seconds)
            return PreemptionOutcome("error", f"preemption failed: {status.message}")
        if plan is None:
            if status.is_skip:
                # Nothing it could evict: preemption did not apply.
                return None
            self._preemptions.workload_attempt("unschedulable", seconds)
            return PreemptionOutcome("unschedulable", f"preemption: {status.message}")
        if not plan.victims:
            # It fits beside every candidate: eviction is not what it lacks.
            return None
        # Run "permitDisruption" plugins: the whole gang fits with the plan.
        permit = fwk.binding.run_permit_disruption(self._new_cycle_state(), plan)
        if not permit.is_success:
            self._preemptions.workload_attempt("rejected", seconds)
            return PreemptionOutcome(
                "rejected", f"preemption refused: {failure_message(permit, None)}"
            )
        return self._carry_out(attempt, plan, seconds)

    def _carry_out(
        self, attempt: GroupAttempt, plan: DisruptionPlan, seconds: float
    ) -> PreemptionOutcome:
        """The plan is permitted: hold the gang to its nominated nodes and evict the
        victims (victim groups evicted whole are told so)."""
        fwk, entity = attempt.fwk, attempt.entity
        self._preemptions.workload_attempt("preempted", seconds, plan.reprieved)
        grace = max(
            (
                v.pod.spec.termination_grace_period_seconds
                if v.pod.spec.termination_grace_period_seconds is not None
                else DEFAULT_GRACE_SECONDS
                for v in (*plan.victims, *plan.awaited)
            ),
            default=0,
        )
        self._sweep()
        # The gang waits for its victims and for the terminating pods its plan
        # counted as gone (``DisruptionPlan.awaited``).
        self._pending[entity.ref.key] = _Pending(
            [(v.key, v.pod.metadata.uid) for v in (*plan.victims, *plan.awaited)],
            dict(plan.nominated),
            self._clock() + grace + HOLD_SLACK_SECONDS,
        )
        self._preemptions.actuate_group(
            fwk.name, entity.ref, entity.priority, entity.members, plan, by=fwk.preemption_plugin
        )
        if self._disrupted is not None:
            for victim in plan.whole_groups:
                self._disrupted(victim, f"Preempted by pod group {entity.ref.display}")
        groups = f" (whole groups: {len(plan.whole_groups)})" if plan.whole_groups else ""
        return PreemptionOutcome(
            "preempted",
            f"preemption: {len(plan.victims)} lower-priority pod(s){groups} are being "
            "evicted to make room for the gang",
            plan,
        )
