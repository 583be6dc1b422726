"""``scheduleTimeoutSeconds`` for gangs placed by the pod-group cycle.

A gang in troupe never holds capacity while it waits — it is placed all at once or
not at all — so its timeout has nothing to release. What a user needs is to be
told: when a gang has waited in the queue (gated for members, or unschedulable)
longer than its ``scheduleTimeoutSeconds`` (or the profile's
``gangScheduleTimeoutSeconds``), every waiting member gets a ``PodScheduled=False``
condition and the group a ``FailedScheduling`` event saying so, once per timeout
period. The gang keeps its place in the queue and is still retried on cluster
events: a timeout is a report, not a verdict (the controller that owns the pods
decides whether to give up).

``GangTimeouts.sweep`` runs from the scheduler's housekeeping loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from troupe.api.client import Event
from troupe.api.gangs import GroupKey
from troupe.api.objects import PodCondition
from troupe.queue.entity import QueuedGroupInfo
from troupe.scheduler.group_cycle import group_object_ref

if TYPE_CHECKING:
    from troupe.scheduler.schedule_one import Scheduler

log = structlog.get_logger("troupe.gang")

REASON_TIMEOUT = "Unschedulable"


class GangTimeouts:
    def __init__(self, scheduler: Scheduler, default_timeout: float) -> None:
        self.s = scheduler
        self.default_timeout = default_timeout
        self._marked: dict[GroupKey, float] = {}

    def sweep(self) -> list[GroupKey]:
        """Mark every gang waiting past its timeout; returns the keys marked."""
        s = self.s
        now = s.clock.now()
        marked: list[GroupKey] = []
        waiting: set[GroupKey] = set()
        for queue in ("gated", "unschedulable", "backoff"):
            for entity in s.queue.entities(queue):
                if not isinstance(entity, QueuedGroupInfo):
                    continue
                key = entity.ref.key
                waiting.add(key)
                policy = s.groups.policy(entity.ref)
                timeout = (
                    policy.timeout_seconds
                    if policy is not None and policy.timeout_seconds
                    else self.default_timeout
                )
                since = self._marked.get(key) or s.queue.group_first_seen(key)
                if since is None or now - since < timeout:
                    continue
                self._mark(entity, timeout, policy.min_count if policy else 0)
                self._marked[key] = now
                marked.append(key)
        for key in list(self._marked):
            if key not in waiting:
                del self._marked[key]
        return marked

    def _mark(self, entity: QueuedGroupInfo, timeout: float, min_count: int) -> None:
        s = self.s
        ref = entity.ref
        placed = s.groups.placed_count(ref.key)
        message = (
            f"gang {ref.key}: not scheduled within its schedule timeout ({timeout:g}s); "
            f"{placed} of {min_count} required pods placed"
        )
        if entity.gating_message:
            message += f"; {entity.gating_message}"
        for info in entity.members.values():
            condition = PodCondition(
                type="PodScheduled", status="False", reason=REASON_TIMEOUT, message=message
            )
            s.writer.pod_status(info.pod, condition, None)
        profile = next((i.pod.spec.scheduler_name for i in entity.members.values()), "")
        s.writer.event(
            Event(
                group_object_ref(ref),
                "Warning",
                "FailedScheduling",
                "Scheduling",
                message,
                reporting_controller=profile,
            )
        )
        log.info("gang schedule timeout", group=ref.key, timeout=timeout, placed=placed)
