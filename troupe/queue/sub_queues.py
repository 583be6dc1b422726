"""The four sub-queues and the moves between them, used by every ``SchedulingQueue`` call.

``SchedulingQueue`` decides *when* an entity moves (an event, a failure, a flush);
``SubQueues`` decides *where* it lands, runs PreEnqueue on the way in, and reports
each arrival to the ``on_incoming`` hook (``scheduler_queue_incoming_pods_total``).
An entity is in at most one sub-queue; every move first takes it out of the one
it was in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from troupe.api.clock import Clock
from troupe.api.objects import Pod
from troupe.api.status import Status
from troupe.queue.active import ActiveQueue
from troupe.queue.backoff import BackoffQueue
from troupe.queue.entity import LessFunc, QueuedEntity
from troupe.queue.hints import Strategy
from troupe.queue.unschedulable import gated_pool, unschedulable_pool

QueueName = Literal["active", "backoff", "unschedulable", "gated"]
"""The ``queue`` label of ``scheduler_pending_pods`` and ``scheduler_queue_incoming_pods_total``."""

IncomingHook = Callable[[str, str], None]
"""(queue, event) for each entity entering a sub-queue."""

UNNAMED_GATE = "PreEnqueue"
"""Recorded as the gating plugin when a refusing Status names no plugin."""


class SubQueues:
    def __init__(
        self,
        less: LessFunc,
        clock: Clock,
        pre_enqueue: Callable[[Pod], Status],
        initial_backoff: float,
        max_backoff: float,
        on_incoming: IncomingHook | None,
    ) -> None:
        self._clock = clock
        self._pre_enqueue = pre_enqueue
        self._on_incoming = on_incoming
        self.active = ActiveQueue(less)
        self.backoff = BackoffQueue(clock, less, initial_backoff, max_backoff)
        self.unschedulable = unschedulable_pool()
        self.gated = gated_pool()

    def __len__(self) -> int:
        return len(self.active) + len(self.backoff) + len(self.unschedulable) + len(self.gated)

    def where(self, key: str) -> QueueName | None:
        if key in self.active:
            return "active"
        if key in self.backoff:
            return "backoff"
        if key in self.unschedulable:
            return "unschedulable"
        if key in self.gated:
            return "gated"
        return None

    def get(self, key: str) -> QueuedEntity | None:
        for queue in (self.active, self.backoff, self.unschedulable, self.gated):
            if (entity := queue.get(key)) is not None:
                return entity
        return None

    def remove(self, key: str) -> QueuedEntity | None:
        for queue in (self.active, self.backoff, self.unschedulable, self.gated):
            if (entity := queue.remove(key)) is not None:
                return entity
        return None

    def entities(self, queue: QueueName) -> list[QueuedEntity]:
        if queue == "active":
            return list(self.active)
        if queue == "backoff":
            return self.backoff.entities()
        return (self.unschedulable if queue == "unschedulable" else self.gated).entities()

    def counts(self) -> dict[str, int]:
        return {
            "active": len(self.active),
            "backoff": len(self.backoff),
            "unschedulable": len(self.unschedulable),
            "gated": len(self.gated),
        }

    # --- moves (the entity is in no sub-queue when these are called) ------------------

    def requeue(
        self, entity: QueuedEntity, strategy: Strategy, event: str, *, admit: bool = True
    ) -> QueueName:
        """Put ``entity`` where ``strategy`` says (upstream requeuePodWithQueueingStrategy).

        SKIP waits in the unschedulable pool; AFTER_BACKOFF waits out what is left
        of the backoff; IMMEDIATELY (a PENDING plugin said go) and entities whose
        backoff is over go straight to active. ``admit=False`` skips PreEnqueue for
        an entity that has just passed it.
        """
        if strategy is Strategy.SKIP:
            self.unschedulable.add(entity, self._clock.now())
            self._incoming("unschedulable", event)
            return "unschedulable"
        if strategy is Strategy.AFTER_BACKOFF and self.backoff.is_backing_off(entity):
            # PreEnqueue runs on entering backoff, not on leaving it (upstream
            # SchedulerPopFromBackoffQ), so flushing backoff never gates.
            if admit and not self._admit(entity, event):
                return "gated"
            self.backoff.add(entity)
            self._incoming("backoff", event)
            return "backoff"
        return self.to_active(entity, event, admit=admit)

    def to_active(self, entity: QueuedEntity, event: str, *, admit: bool = True) -> QueueName:
        if admit and not self._admit(entity, event):
            return "gated"
        if entity.initial_attempt_timestamp is None:
            # Upstream sets it on the first move to activeQ: the SLI counts the wait
            # in the active queue but not time spent gated.
            entity.initial_attempt_timestamp = self._clock.now()
        self.active.push(entity)
        self._incoming("active", event)
        return "active"

    def recheck_gated(self, entity: QueuedEntity, event: str) -> QueueName:
        """Run PreEnqueue again for a gated entity; release it if it passes."""
        self.gated.remove(entity.key)
        status = self.run_pre_enqueue(entity)
        if status.is_success:
            entity.gating_plugin = ""
            return self.requeue(entity, Strategy.AFTER_BACKOFF, event, admit=False)
        # Still gated: re-indexed under the (possibly different) gate; not counted
        # as incoming, since it never left.
        entity.gating_plugin = status.plugin or UNNAMED_GATE
        self.gated.add(entity, self._clock.now())
        return "gated"

    def run_pre_enqueue(self, entity: QueuedEntity) -> Status:
        for pod in entity.pods():
            status = self._pre_enqueue(pod)
            if not status.is_success:
                return status
        return Status()

    def _admit(self, entity: QueuedEntity, event: str) -> bool:
        """Run PreEnqueue; a refused entity goes to the gated pool."""
        status = self.run_pre_enqueue(entity)
        if status.is_success:
            entity.gating_plugin = ""
            return True
        entity.gating_plugin = status.plugin or UNNAMED_GATE
        self.gated.add(entity, self._clock.now())
        self._incoming("gated", event)
        return False

    def _incoming(self, queue: QueueName, event: str) -> None:
        if self._on_incoming is not None:
            self._on_incoming(queue, event)
