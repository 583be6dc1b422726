"""A gang admitted to binding: its members' binding cycles, and how the gang ends.

The group cycle's submit step (``troupe.scheduler.gangs.submit``) admits a gang
whose quorum is placed and permitted with ``GangAdmission.admit``. Its members go
through the ordinary binding steps (``troupe.scheduler.cycle.binding_cycle``) with a
barrier after PreBind:

1. every member runs WaitOnPermit and PreBind in a binding slot of its own
   (concurrently, as slots allow; the slot is given back when its PreBind ends);
2. only when every member's PreBind has succeeded does any member go on to Bind
   (and PostBind), each in a binding slot again. If any member's PreBind fails (a
   plugin's failure or timeout, the member's node deleted, ...), no member is bound:
   every member is unreserved and forgotten, in reverse order of placement, and the
   gang goes back to the queue with backoff, as for a failed binding below.

Volumes and devices a PreBind provisions or allocates for one member are thus
never half-used by a gang that did not get them all.

Binding N pods is not atomic in Kubernetes. If a binding fails for good (the API
refuses it) and the group falls below quorum, the admission is *broken*: members
whose binding has not been posted yet are released instead of bound, and once every
member's binding has settled the released members go back to the queue together,
with backoff (docs/gangs.md, "What troupe guarantees"). Members whose binding is
still waiting to be sent (for the client's rate limiter, say) are called off at
once (``BindingCycle.call_off``), so a broken gang is re-decided as a whole rather
than completed piecemeal. A member whose node is deleted before its binding is sent
breaks the admission the same way. When every member has settled, the v1alpha2
PodGroup gets ``PodGroupScheduled`` (KEP-5832).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import structlog

from troupe.api.client import ApiError
from troupe.api.composite import GroupNode
from troupe.api.events import ASSIGNED_POD_DELETE
from troupe.api.gangs import GroupRef
from troupe.api.status import Code, Status
from troupe.queue.entity import QueuedGroupInfo
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cycle.binding_cycle import BindingCycle
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.gangs import composite_quorum
from troupe.scheduler.gangs.attempt import Placement
from troupe.scheduler.gangs.directory import GangDirectory
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
    # Each member's node, to call off the bindings not sent when the gang breaks.
    nodes: dict[str, str] = field(default_factory=dict)
    # Members whose binding failed or was called off: requeued together, with
    # backoff, once every member's binding has settled.
    released: list[str] = field(default_factory=list)
    # A CompositePodGroup's tree: its quorum is per level, not a pod count.
    tree: GroupNode | None = None
    # The members, in the order they were placed (undone in reverse).
    placed: list[Placement] = field(default_factory=list)
    # Each member's WaitOnPermit and PreBind outcome, as they end (the barrier).
    pre_bound: dict[str, Status] = field(default_factory=dict)

    @property
    def ref(self) -> GroupRef:
        return self.entity.ref


@dataclass(eq=False, kw_only=True)
class GangAdmission:
    binding: BindingCycle
    queue: SchedulingQueue
    groups: GangDirectory
    report: GangReporter

    async def admit(
        self, fwk: Framework, placed: Sequence[Placement], start: float, admission: Admission
    ) -> None:
        """Run every placed member's PreBind, each in a binding slot (waiting for one
        when every slot is taken); Bind follows once all of them have succeeded."""
        admission.placed = list(placed)
        for p in placed:
            await self.binding.bindings.acquire()
            key, node = p.info.key, p.result.node
            admission.nodes[key] = node
            self.binding.spawn(self._pre_bind(fwk, p, start, admission), key, node)

    async def _pre_bind(
        self, fwk: Framework, p: Placement, start: float, admission: Admission
    ) -> None:
        """One member's WaitOnPermit and PreBind; the last to end decides for all."""
        status = await self.binding.pre_bind_steps(fwk, p.state, p.info, p.result.node)
        admission.pre_bound[p.info.key] = status
        if len(admission.pre_bound) < len(admission.placed):
            return
        failed = [(k, st) for k, st in admission.pre_bound.items() if not st.is_success]
        if failed:
            self._undo(fwk, admission, *failed[0])
            return
        # Every PreBind succeeded: Bind, in placement order, each in a slot taken anew
        # by a task of its own (never while holding this one: no gang waits on a slot
        # another gang holds while it waits).
        self.binding.background.spawn(
            self._bind_all(fwk, start, admission), name=f"bind {admission.ref.key}"
        )

    async def _bind_all(self, fwk: Framework, start: float, admission: Admission) -> None:
        for p in admission.placed:
            await self.binding.bindings.acquire()
            self.binding.spawn(self.bind(fwk, p, start, admission), p.info.key, p.result.node)

    def _undo(self, fwk: Framework, admission: Admission, key: str, status: Status) -> None:
        """A member's PreBind failed: nothing is bound, every member is unreserved (last
        placed first) and the gang is retried."""
        why = (
            f"gang {admission.ref.display}: PreBind of {key} failed ({status.message}); "
            "no pod of the gang is bound, the gang is released and retried"
        )
        admission.broken = why
        admission.error = status.code is Code.ERROR
        log.warning(
            "gang member PreBind failed", pod=key, group=admission.ref.key, error=status.message
        )
        for p in reversed(admission.placed):
            self.binding.revert(fwk, p.state, p.info, p.result.node)
            self.binding.take_called_off(p.info.key)
            self.queue.on_event(ASSIGNED_POD_DELETE, p.info.pod, None)
        for p in admission.placed:
            if p.info.key == key and admission.error:
                self.report.pod(p.info, REASON_SCHEDULER_ERROR, f"PreBind failed: {status.message}")
            else:
                self.report.pod(p.info, REASON_UNSCHEDULABLE, why)
            self._settled(admission, p.info.key, released=True)

    def _break(self, admission: Admission, why: str, *, error: bool) -> None:
        """The gang fell below quorum: release every member not bound yet."""
        if admission.broken:
            return
        admission.broken = why
        admission.error = error
        for key in admission.unposted:
            node = admission.nodes.get(key)
            if node is not None:
                self.binding.call_off(key, node, why)

    async def bind(self, fwk: Framework, p: Placement, start: float, admission: Admission) -> None:
        """One member's binding cycle (an owned binding task)."""
        binding = self.binding
        info, node = p.info, p.result.node
        if admission.broken:
            binding.revert(fwk, p.state, info, node)
            self.report.pod(info, REASON_UNSCHEDULABLE, admission.broken)
            self._settled(admission, info.key, released=True)
            return
        status = await binding.bind_step(fwk, p.state, info, node)
        if status.is_success:
            binding.bound(fwk, p.state, info, p.result, start)
            self._settled(admission, info.key, released=False)
            return
        binding.revert(fwk, p.state, info, node)
        self.queue.on_event(ASSIGNED_POD_DELETE, info.pod, None)
        called_off = binding.take_called_off(info.key)
        if called_off is not None and admission.broken:
            # Released with the rest of a broken gang before its binding was sent.
            self.report.pod(info, REASON_UNSCHEDULABLE, admission.broken)
            self._settled(admission, info.key, released=True)
            return
        error = status.error
        # Deleted, re-created or bound elsewhere, as the informer reported while the
        # binding ran: never placed again. A refusal nothing explains yet is retried
        # with the gang, like any failed binding (BindingCycle's docstring).
        refused = isinstance(error, ApiError) and (error.is_conflict or error.is_not_found)
        gone = refused and binding.superseded(info.key)
        log.warning(
            "gang member binding failed",
            pod=info.key,
            group=admission.ref.key,
            node=node,
            error=status.message,
        )
        placed = self.groups.placed_count(admission.ref.key)
        if not self._holds(admission, placed):
            self._break(
                admission,
                f"gang {admission.ref.display}: binding {info.key} failed ({status.message}); "
                f"{placed} of {admission.min_count} required pods remain placed, "
                "the rest of the gang is released and retried",
                error=not gone and called_off is None,
            )
        if called_off is not None:
            # Its node went away: nothing was sent; it is retried with the gang.
            self.report.pod(info, REASON_UNSCHEDULABLE, status.message)
        elif not gone:
            self.report.pod(info, REASON_SCHEDULER_ERROR, f"binding failed: {status.message}")
        # Bound elsewhere or deleted: the informer reports it; never bind it again.
        self._settled(admission, info.key, released=not gone)

    def _holds(self, admission: Admission, placed: int) -> bool:
        """Whether the admitted group still has its quorum with ``placed`` members."""
        tree = admission.tree
        if tree is None:
            return placed >= admission.min_count
        return composite_quorum.holds(tree, self.groups.leaf_placed(tree))

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
