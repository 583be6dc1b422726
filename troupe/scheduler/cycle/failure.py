"""What happens when a pod cannot be scheduled in this attempt.

``FailureReporter.report`` records why on the queued entity (the plugins that
rejected it drive queueing hints), puts it back in the queue (unschedulable pool or
backoff), and tells the user: a ``PodScheduled=False`` condition with reason
``Unschedulable`` (or ``SchedulerError`` for internal errors) and a
``FailedScheduling`` event carrying upstream's FitError message. API writes run in
the background writer; the scheduling loop never waits for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import structlog

from troupe.api.client import Event, ObjectRef
from troupe.api.framework import Diagnosis
from troupe.api.objects import PodCondition
from troupe.api.status import Code, Status
from troupe.queue.entity import QueuedPodInfo
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cycle.writer import BackgroundWriter
from troupe.scheduler.framework.messages import fit_error_message
from troupe.scheduler.observe.explain import Explanations

log = structlog.get_logger("troupe.scheduler")

REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"


class _Named(Protocol):
    @property
    def name(self) -> str: ...


def failure_message(status: Status, diagnosis: Diagnosis | None) -> str:
    if diagnosis is not None:
        return fit_error_message(diagnosis)
    return status.message or status.code.name


@dataclass(eq=False)
class FailureReporter:
    writer: BackgroundWriter
    queue: SchedulingQueue
    # The last failed attempt of each pending pod (``troupe explain``).
    explanations: Explanations | None = None

    def report(
        self,
        fwk: _Named,
        entity: QueuedPodInfo,
        status: Status,
        diagnosis: Diagnosis | None,
        cycle: int,
        nominated_node_name: str | None = None,
    ) -> None:
        info = entity.pod_info
        message = failure_message(status, diagnosis)
        plugins = set(diagnosis.unschedulable_plugins) if diagnosis is not None else set()
        if status.plugin:
            plugins.add(status.plugin)
        if status.code is Code.PENDING:
            entity.pending_plugins = plugins
            entity.unschedulable_plugins = set()
        elif status.code is Code.ERROR:
            entity.unschedulable_plugins = set()
        else:
            entity.unschedulable_plugins = plugins
        if self.explanations is not None:
            self.explanations.pod_failed(info, status, diagnosis, message, nominated_node_name)
        # Ends the attempt too (the queue checks events seen while in flight).
        self.queue.add_unschedulable_if_not_present(entity, cycle)
        reason = REASON_SCHEDULER_ERROR if status.code is Code.ERROR else REASON_UNSCHEDULABLE
        if status.code is Code.ERROR:
            log.error("error scheduling pod", pod=info.key, profile=fwk.name, error=message)
        else:
            log.debug("unable to schedule pod", pod=info.key, profile=fwk.name, reason=message)
        condition = PodCondition(
            type="PodScheduled", status="False", reason=reason, message=message
        )
        # With the condition, in one patch: the node preemption nominated ("" clears).
        self.writer.pod_status(info.pod, condition, nominated_node_name)
        self.writer.event(
            Event(
                ObjectRef.of_pod(info.pod),
                "Warning",
                "FailedScheduling",
                "Scheduling",
                message,
                reporting_controller=fwk.name,
            )
        )
