"""The four sub-queues and the moves between them.

``SchedulingQueue`` decides *when* an entity moves (an event, a failure, a flush);
``SubQueues`` decides *where* it lands, runs PreEnqueue on the way in (the
``EntityGate``: the pods' own PreEnqueue for a pod, the gang checks for a group),
and reports each arrival to the ``on_incoming`` hook
(``scheduler_queue_incoming_pods_total``). An entity is in at most one sub-queue;
every move first takes it out of the one it was in. Entities are indexed by
``queue_id``.

Called by ``GroupQueue`` (a group's own entity), ``Moves`` (any entity leaving a
pool, its backoff or its flight: a pod is offered to its group first),
``Retries`` and ``Intake`` (lookups and heap re-sorts). Knows nothing of groups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from troupe.api.clock import Clock
from troupe.api.status import Status
from troupe.queue.active import ActiveQueue
from troupe.queue.backoff import BackoffQueue
from troupe.queue.entity import LessFunc, QueuedEntity, SortKey
from troupe.queue.hints import Strategy
from troupe.queue.unschedulable import gated_pool, unschedulable_pool

QueueName = Literal["active", "backoff", "unschedulable", "gated"]
"""The ``queue`` label of ``scheduler_pending_pods`` and ``scheduler_queue_incoming_pods_total``."""

IncomingHook = Callable[[str, str], None]
"""(queue, event) for each entity entering a sub-queue."""

Gate = Callable[[QueuedEntity], Status]
"""PreEnqueue for a whole entity: success lets it into the active or backoff queue."""

UNNAMED_GATE = "PreEnqueue"
"""Recorded as the gating plugin when a refusing Status names no plugin."""


class SubQueues:
    def __init__(
        self,
        less: LessFunc,
        clock: Clock,
        gate: Gate,
        initial_backoff: float,
        max_backoff: float,
        on_incoming: IncomingHook | None,
        sort_key: SortKey | None = None,
    ) -> None:
        self._clock = clock
        self._gate = gate
        self._on_incoming = on_incoming
        self.active = ActiveQueue(less, sort_key)
        self.backoff = BackoffQueue(clock, less, initial_backoff, max_backoff)
        self.unschedulable = unschedulable_pool()
        self.gated = gated_pool()

    def __len__(self) -> int:
        return len(self.active) + len(self.backoff) + len(self.unschedulable) + len(self.gated)

    def where(self, queue_id: str) -> QueueName | None:
        if queue_id in self.active:
            return "active"
        if queue_id in self.backoff:
            return "backoff"
        if queue_id in self.unschedulable:
            return "unschedulable"
        if queue_id in self.gated:
            return "gated"
        return None

    def get(self, queue_id: str) -> QueuedEntity | None:
        for queue in (self.active, self.backoff, self.unschedulable, self.gated):
            if (entity := queue.get(queue_id)) is not None:
                return entity
        return None

    def remove(self, queue_id: str) -> QueuedEntity | None:
        for queue in (self.active, self.backoff, self.unschedulable, self.gated):
            if (entity := queue.remove(queue_id)) is not None:
                return entity
        return None

    def entities(self, queue: QueueName) -> list[QueuedEntity]:
        if queue == "active":
            return list(self.active)
        if queue == "backoff":
            return self.backoff.entities()
        return (self.unschedulable if queue == "unschedulable" else self.gated).entities()

    def counts(self) -> dict[QueueName, int]:
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

    def ungate(self, entity: QueuedEntity) -> bool:
        """Run PreEnqueue again for a gated entity: True when it passed and left the
        gated pool (the caller places it), False when it stays gated."""
        self.gated.remove(entity.queue_id)
        status = self._gate(entity)
        if status.is_success:
            entity.gating_plugin = entity.gating_message = ""
            return True
        # Still gated: re-indexed under the (possibly different) gate; not counted
        # as incoming, since it never left.
        _record_gate(entity, status)
        self.gated.add(entity, self._clock.now())
        return False

    def recheck_gated(self, entity: QueuedEntity, event: str) -> QueueName:
        """Run PreEnqueue again for a gated entity; release it (after any backoff) if it
        passes. A pod leaving the gated pool goes through ``Moves.release_gated``."""
        if not self.ungate(entity):
            return "gated"
        return self.requeue(entity, Strategy.AFTER_BACKOFF, event, admit=False)

    def run_gate(self, entity: QueuedEntity) -> Status:
        return self._gate(entity)

    def to_gated(self, entity: QueuedEntity, status: Status, event: str) -> QueueName:
        """Put ``entity``, refused by PreEnqueue with ``status``, in the gated pool."""
        _record_gate(entity, status)
        self.gated.add(entity, self._clock.now())
        self._incoming("gated", event)
        return "gated"

    def _admit(self, entity: QueuedEntity, event: str) -> bool:
        """Run PreEnqueue; a refused entity goes to the gated pool."""
        status = self._gate(entity)
        if status.is_success:
            entity.gating_plugin = entity.gating_message = ""
            return True
        self.to_gated(entity, status, event)
        return False

    def _incoming(self, queue: QueueName, event: str) -> None:
        if self._on_incoming is not None:
            self._on_incoming(queue, event)


def _record_gate(entity: QueuedEntity, status: Status) -> None:
    entity.gating_plugin = status.plugin or UNNAMED_GATE
    entity.gating_message = status.message
