"""A gang admitted to binding: its members' binding cycles, and how the gang ends.

The group cycle (``troupe.scheduler.gangs.group_cycle``) admits a gang whose quorum
is placed and permitted, and hands each placed member to ``GangAdmission.bind`` in
an owned binding task. Each member goes through the ordinary binding steps
(``troupe.scheduler.cycle.binding_cycle``: WaitOnPermit, PreBind, Bind, PostBind).

Binding N pods is not atomic in Kubernetes. If a binding fails for good (the API
refuses it) and the group falls below quorum, the admission is *broken*: members
whose binding has not been posted yet are released instead of bound, and once every
member's binding has settled the released members go back to the queue together,
with backoff (docs/gangs.md, "What troupe guarantees"). When every member has
settled, the v1alpha2 PodGroup gets ``PodGroupScheduled`` (KEP-5832).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import structlog

from troupe.api.client import ApiError
from troupe.api.events import ASSIGNED_POD_DELETE
from troupe.api.gangs import GroupRef
from troupe.queue.entity import QueuedGroupInfo
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cycle.binding_cycle import BindingCycle
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.gangs.placement import Placement
from troupe.scheduler.gangs.report import (
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    GangReporter,
)

log = structlog.get_logger("troupe.gang")


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


class GangAdmission:
    def __init__(
        self,
        *,
        binding: BindingCycle,
        queue: SchedulingQueue,
        groups: GangDirectory,
        report: GangReporter,
    ) -> None:
        self.binding = binding
        self.queue = queue
        self.groups = groups
        self.report = report

    async def bind(self, fwk: Framework, p: Placement, start: float, admission: Admission) -> None:
        """One member's binding cycle (an owned binding task)."""
        binding = self.binding
        info, node = p.info, p.result.node
        if admission.broken:
            binding.revert(fwk, p.state, info, node)
            self.report.pod(info, REASON_UNSCHEDULABLE, admission.broken)
            self._settled(admission, info.key, released=True)
            return
        status = await binding.bind_steps(fwk, p.state, info, node)
        if status.is_success:
            binding.bound(fwk, p.state, info, p.result, start)
            self._settled(admission, info.key, released=False)
            return
        binding.revert(fwk, p.state, info, node)
        self.queue.on_event(ASSIGNED_POD_DELETE, info.pod, None)
        error = status.error
        gone = isinstance(error, ApiError) and (error.is_conflict or error.is_not_found)
        log.warning(
            "gang member binding failed",
            pod=info.key,
            group=admission.ref.key,
            node=node,
            error=status.message,
        )
        placed = self.groups.placed_count(admission.ref.key)
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
            placed = self.groups.placed_count(ref.key)
            self.report.group_condition(
                ref,
                "Scheduled",
                f"gang {ref.display}: {placed} of {admission.min_count} required pods placed",
            )
        if admission.released:
            self.queue.requeue_group_remainder(
                admission.entity, admission.released, admission.cycle, unschedulable_plugins=set()
            )
