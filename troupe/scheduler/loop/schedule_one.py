"""schedule_one: pop an entity, run its scheduling cycle, hand off the binding cycle.

``Scheduler.schedule_one`` is the loop body (upstream ``schedule_one.go``): pop the
next entity from the queue, pick the framework by schedulerName, and run

- for a pod, the pod cycle (``troupe.scheduler.cycle.pod_cycle``): the per-pod
  algorithm, assume, Reserve, Permit, then the binding cycle in an owned task;
- for a pod group, the group cycle (``troupe.scheduler.gangs.group_cycle``): the
  whole gang placed in one cycle, all or nothing.

``Scheduler`` is the loop only, with its housekeeping (queue flushes, assumed-pod
expiry, gang timeouts and recovery): every part it runs is built by the composition
root, ``troupe.scheduler.service.wiring``. Cluster events from the informers arrive
through ``troupe.scheduler.service.handlers``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from troupe.api.clock import Clock
from troupe.api.events import ASSIGNED_POD_DELETE
from troupe.api.tasks import TaskSupervisor, WorkerPool
from troupe.queue.entity import QueuedEntity, QueuedGroupInfo, QueuedPodInfo
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cache import Cache
from troupe.scheduler.cycle.binding_cycle import BindingCycle
from troupe.scheduler.cycle.pod_cycle import PodCycle
from troupe.scheduler.cycle.writer import BackgroundWriter
from troupe.scheduler.framework.waiting_pods import WaitingPods
from troupe.scheduler.gangs.group_cycle import GroupCycle
from troupe.scheduler.loop.profiles import Profiles
from troupe.scheduler.observe.stats import AttemptStats

log = structlog.get_logger("troupe.scheduler")


def _nothing() -> None:
    return None


def _popped(entity: QueuedEntity | None) -> None:
    return None


@dataclass(frozen=True, slots=True)
class LoopHooks:
    """Called around every pop (benchmarks attribute cycles to the entity popped)."""

    before_pop: Callable[[], None] = _nothing
    popped: Callable[[QueuedEntity | None], None] = _popped


@dataclass(frozen=True, slots=True)
class LoopParts:
    """What the loop runs, each built by the composition root."""

    profiles: Profiles
    queue: SchedulingQueue
    cache: Cache
    pod_cycle: PodCycle
    group_cycle: GroupCycle
    binding: BindingCycle
    waiting: WaitingPods
    stats: AttemptStats
    bindings: WorkerPool
    writer: BackgroundWriter
    background: TaskSupervisor
    clock: Clock
    # Run once a second after assumed-pod expiry (gang timeouts, gang recovery).
    sweeps: Sequence[Callable[[], object]] = ()
    hooks: LoopHooks = LoopHooks()


class Scheduler:
    def __init__(self, parts: LoopParts) -> None:
        self.parts = parts
        self.profiles = parts.profiles
        self.queue = parts.queue
        self.cache = parts.cache
        self.stats = parts.stats
        self.bindings = parts.bindings
        self.background = parts.background
        self.writer = parts.writer
        self.waiting = parts.waiting
        self.clock = parts.clock
        self._stopping = False
        self._housekeeping: list[asyncio.Task[None]] = []

    def owns(self, scheduler_name: str) -> bool:
        return self.profiles.owns(scheduler_name)

    # --- the loop ------------------------------------------------------------------

    async def schedule_one(self) -> bool:
        """One pop and attempt; False once the queue is closed.

        No pod or group can stop the loop: an unexpected error fails that entity's
        attempt (``_attempt_failed``) and the loop goes on."""
        hooks = self.parts.hooks
        hooks.before_pop()
        entity = await self.queue.pop()
        hooks.popped(entity)
        if entity is None:
            return False
        cycle = self.queue.scheduling_cycle
        try:
            if isinstance(entity, QueuedGroupInfo):
                await self._schedule_group(entity, cycle)
            elif isinstance(entity, QueuedPodInfo):
                await self._schedule_pod(entity, cycle)
            else:
                log.error("unknown queued entity kind", entity=entity.key)
                self.queue.done(entity.key)
        except Exception:
            self._attempt_failed(entity, cycle)
        return True

    def _attempt_failed(self, entity: QueuedEntity, cycle: int) -> None:
        """An attempt raised: log it with its traceback, count it as an error, undo
        what it assumed that is not being bound, and retry the entity after backoff."""
        members = (
            list(entity.members.values())
            if isinstance(entity, QueuedGroupInfo)
            else [entity.pod_info]
            if isinstance(entity, QueuedPodInfo)
            else []
        )
        profile = members[0].pod.spec.scheduler_name if members else ""
        log.exception("scheduling attempt failed", entity=entity.key, profile=profile)
        if isinstance(entity, QueuedGroupInfo):
            entity_type = "compositepodgroup" if entity.ref.composite else "podgroup"
            self.stats.group_attempt("error", profile, 0.0, entity_type)
        else:
            self.stats.attempt("error", profile, 0.0)
        remaining = []
        binding = self.parts.binding
        for info in members:
            if self.cache.uid_of(info.key) != info.pod.metadata.uid:
                remaining.append(info.key)
            elif not binding.in_flight(info.key) and not self.waiting.get(info.key):
                # Assumed by the failed attempt and handed to no binding cycle.
                self.cache.forget(info)
                self.stats.forget_member(info.key)
                remaining.append(info.key)
        # An error: retried after backoff, whatever the cluster events.
        entity.unschedulable_plugins = set()
        if isinstance(entity, QueuedGroupInfo):
            self.queue.requeue_group_remainder(entity, remaining, cycle, unschedulable_plugins=())
        elif remaining:
            self.queue.add_unschedulable_if_not_present(entity, cycle)
        else:
            self.queue.done(entity.key)

    async def _schedule_pod(self, entity: QueuedPodInfo, cycle: int) -> None:
        info = entity.pod_info
        fwk = self.profiles.get(info.pod.spec.scheduler_name)
        cached_uid = self.cache.uid_of(info.key)
        if fwk is None or cached_uid == info.pod.metadata.uid:
            # Not ours (any more), or already assumed/bound: nothing to do.
            self.queue.done(info.key)
            return
        if cached_uid is not None:
            # A deleted pod of the same name is still being bound; try this one
            # once that binding has settled (it will fail on the UID precondition).
            entity.unschedulable_plugins = set()
            self.queue.add_unschedulable_if_not_present(entity, cycle)
            return
        await self.parts.pod_cycle.run(fwk, entity, cycle)

    async def _schedule_group(self, entity: QueuedGroupInfo, cycle: int) -> None:
        first = next(iter(entity.members.values()), None)
        fwk = self.profiles.get(first.pod.spec.scheduler_name) if first else None
        if fwk is None:
            self.queue.done(entity.key, entity)
            return
        await self.parts.group_cycle.run(fwk, entity, cycle)

    # --- lifecycle ---------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule until ``stop``; housekeeping (queue flushes, assumed-pod expiry)
        runs beside the loop."""
        self._housekeeping = [
            self.background.spawn(self.queue.run(), name="queue flush"),
            self.background.spawn(self._expire_assumed(), name="assumed expiry"),
        ]
        while not self._stopping and await self.schedule_one():
            pass

    async def _expire_assumed(self) -> None:
        while not self._stopping:
            await self.clock.sleep(1.0)
            self.housekeeping()

    def housekeeping(self) -> None:
        """Once a second: expire assumed pods never confirmed, report gang timeouts,
        recover gangs left partly bound."""
        for key in self.cache.cleanup_expired():
            self.queue.on_event(ASSIGNED_POD_DELETE, None, None)
            log.warning("binding never confirmed; capacity released", pod=key)
        for sweep in self.parts.sweeps:
            sweep()

    async def stop(self, grace: float = 10.0) -> None:
        """Stop popping, let in-flight bindings finish for ``grace`` seconds, then
        cancel what is left (each cancelled binding unreserves and forgets)."""
        self._stopping = True
        self.queue.close()
        # The housekeeping loops end only when told: no reason to wait for them.
        for task in self._housekeeping:
            task.cancel()
        await self.bindings.drain(timeout=grace)
        await self.bindings.cancel_all()
        await self.writer.flush(timeout=min(grace, 2.0))
        await self.background.drain(timeout=1.0)
        await self.background.cancel_all()
