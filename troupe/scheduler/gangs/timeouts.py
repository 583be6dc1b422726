"""Gangs that wait: why they are held back, and ``scheduleTimeoutSeconds``.

``GangTimeouts.sweep`` runs from the loop's housekeeping (once a second)
and tells users about gangs that are not being scheduled:

- **Held back by their gate** (the group's PreEnqueue, ``troupe.queue.pre_enqueue``):
  a malformed group object (``minMember: 0``, a Workload without the pod group its
  pods name, ...) or members naming different schedulers are reported at the next
  sweep; a group object that does not exist, or fewer pods than ``minCount``, only
  once the gang has waited so for ``gate_report_after`` seconds (a controller
  creating a gang's pods one by one must not see a condition on every pod). Every
  member gets ``PodScheduled=False`` (reason ``Unschedulable``) with a message
  naming the object and the field, and a ``FailedScheduling`` event; the group
  object (when it exists) gets the event and, for a v1alpha2 PodGroup,
  ``PodGroupScheduled=False``. Members are told once per message; a changed
  message (more pods arrived) is told again at most every ``retell_interval``.
- **Past its timeout**: a gang in troupe never holds capacity while it waits — it
  is placed all at once or not at all — so its timeout has nothing to release.
  When a gang has waited in the queue (gated, unschedulable or backing off) longer
  than its ``scheduleTimeoutSeconds`` (or the profile's
  ``gangScheduleTimeoutSeconds``), every waiting member gets a ``PodScheduled=False``
  condition and the group a ``FailedScheduling`` event saying so, once per timeout
  period. The gang keeps its place in the queue and is still retried on cluster
  events: a timeout is a report, not a verdict (the controller that owns the pods
  decides whether to give up).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import structlog

from troupe.api.clock import Clock
from troupe.api.gangapi import ScheduledOutcome
from troupe.api.gangs import GroupKey, GroupRef
from troupe.queue import GANG_SCHEDULING, MIN_COUNT_MESSAGE, missing_group_message
from troupe.queue.entity import QueuedGroupInfo
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.gangs.report import REASON_UNSCHEDULABLE, GangReporter

log = structlog.get_logger("troupe.gang")

REASON_TIMEOUT: Final = REASON_UNSCHEDULABLE
# A gang held back by its gate has not been tried: its pods say so with the reason
# the API server gives gated pods, which cluster autoscalers do not scale up for
# (an Unschedulable pod would make them add nodes for a group that cannot start).
REASON_GATED: Final = "SchedulingGated"
# How long a gang may wait for its group object or for minCount pods before its
# pods are told (bad input is told at once).
GATE_REPORT_AFTER: Final = 5.0
# At most this often is a changed message told again to members already told.
RETELL_INTERVAL: Final = 60.0


@dataclass(slots=True)
class _Told:
    """What the members of one gated gang were told."""

    kind: str  # "problem" | "missing" | "min_count"
    since: float  # when the gang was first seen held back for this kind of reason
    message: str = ""
    told_at: float = 0.0
    pods: set[str] = field(default_factory=set)


@dataclass(eq=False, kw_only=True)
class GangTimeouts:
    clock: Clock
    queue: SchedulingQueue
    groups: GangDirectory
    report: GangReporter
    default_timeout: float
    gate_report_after: float = GATE_REPORT_AFTER
    retell_interval: float = RETELL_INTERVAL

    def __post_init__(self) -> None:
        self._marked: dict[GroupKey, float] = {}
        self._told: dict[GroupKey, _Told] = {}

    def sweep(self) -> list[GroupKey]:
        """Report gated gangs, and mark every gang waiting past its timeout; returns
        the keys marked for their timeout."""
        self._report_gated()
        now = self.clock.now()
        marked: list[GroupKey] = []
        waiting: set[GroupKey] = set()
        for queue in ("gated", "unschedulable", "backoff"):
            for entity in self.queue.entities(queue):
                if not isinstance(entity, QueuedGroupInfo):
                    continue
                key = entity.ref.key
                waiting.add(key)
                policy = self.groups.policy(entity.ref)
                timeout = (
                    policy.timeout_seconds
                    if policy is not None and policy.timeout_seconds
                    else self.default_timeout
                )
                since = self._marked.get(key) or self.queue.group_first_seen(key)
                if since is None or now - since < timeout:
                    continue
                self._mark(entity, timeout)
                self._marked[key] = now
                marked.append(key)
        for key in list(self._marked):
            if key not in waiting:
                del self._marked[key]
        return marked

    # --- gangs held back by their gate ------------------------------------------------

    def _report_gated(self) -> None:
        now = self.clock.now()
        gated: set[GroupKey] = set()
        for entity in self.queue.entities("gated"):
            if not isinstance(entity, QueuedGroupInfo) or entity.gating_plugin != GANG_SCHEDULING:
                continue
            why = self._held_back(entity)
            if why is None:
                continue  # waiting for the group's attempt in flight: nothing to tell
            kind, message = why
            key = entity.ref.key
            gated.add(key)
            told = self._told.get(key)
            if told is None or told.kind != kind:
                told = self._told[key] = _Told(kind, now)
            if kind != "problem" and now - told.since < self.gate_report_after:
                continue
            if message != told.message and (
                not told.message or now - told.told_at >= self.retell_interval
            ):
                told.message, told.told_at, told.pods = message, now, set()
                # Members breaking upstream's pod-group rules fail the group with
                # SchedulerError, as upstream's cycle does; a CompositePodGroup layout
                # is Invalid (KEP-6012); other bad input is Unschedulable.
                problem = self.groups.problem(entity.ref) if kind == "problem" else None
                outcome: ScheduledOutcome = "Unschedulable"
                if problem is not None and problem.outcome == "SchedulerError":
                    outcome = "SchedulerError"
                elif problem is not None and problem.outcome == "Invalid":
                    outcome = "Invalid"
                self.report.group_condition(entity.ref, outcome, message)
                if kind != "missing":
                    self.report.group_event(entity.ref, message)
            for info in entity.members.values():
                if info.key not in told.pods:
                    told.pods.add(info.key)
                    self.report.pod(info, REASON_GATED, told.message)
        for key in list(self._told):
            if key not in gated:
                del self._told[key]

    def _held_back(self, entity: QueuedGroupInfo) -> tuple[str, str] | None:
        """Why the gang's gate holds it: (kind, message), or None when it only waits
        for its own attempt in flight to end."""
        ref = entity.ref
        policy = self.groups.policy(ref)
        if policy is None:
            return (
                "missing",
                f"gang {ref.display}: {_missing_reason(ref, self.groups.api_version(ref))}",
            )
        problem = self.groups.problem(ref)
        if problem is not None:
            return ("missing" if problem.waiting else "problem"), str(problem)
        have = self.groups.placed_count(ref.key) + len(entity.members)
        if policy.gang and have < policy.min_count:
            return "min_count", (
                f"gang {ref.display}: {MIN_COUNT_MESSAGE} ({ref.min_count_field} is "
                f"{policy.min_count}; {have} of its pods are ready to schedule or placed)"
            )
        return None

    # --- timeouts ------------------------------------------------------------------------

    def _mark(self, entity: QueuedGroupInfo, timeout: float) -> None:
        ref = entity.ref
        placed = self.groups.placed_count(ref.key)
        message = f"gang {ref.display}: not scheduled within its schedule timeout ({timeout:g}s); "
        policy = self.groups.policy(ref)
        problem = self.groups.problem(ref) if policy is not None else None
        if policy is None:
            message += _missing_reason(ref, self.groups.api_version(ref))
        elif problem is not None:
            message += str(problem)
        else:
            message += f"{placed} of {policy.min_count} required pods placed"
            if entity.gating_message:
                message += f"; {entity.gating_message}"
        for info in entity.members.values():
            self.report.pod(info, REASON_TIMEOUT, message, event=False)
        if policy is not None:
            self.report.group_event(ref, message)
        log.info("gang schedule timeout", group=ref.key, timeout=timeout, placed=placed)


def _missing_reason(ref: GroupRef, version: str = "") -> str:
    return (
        f"{missing_group_message(ref)}: no {ref.kind} {version or ref.api.value} {ref.object_key} "
        f"exists (named by the pods' {ref.member_field})"
    )
