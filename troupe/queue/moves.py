"""Moves of an entity leaving a pool, its backoff or its flight, with a pod's group asked first.

A pod entity on its way to the active or backoff queue or the unschedulable pool
may belong in its group's entity: a member of a gang that was held back by its own
PreEnqueue (a scheduling gate), or that was scheduled alone before its group
turned gang or while it was relabelled in flight. ``GroupTable.absorb`` takes such
a pod into its group entity, and books any other grouped pod as one of its group's
solo pods; every other entity goes to ``SubQueues`` as asked.

Used by ``Retries`` (events, activation, flushes), ``Intake`` (new and updated
pods) and ``SchedulingQueue`` (a failed pod attempt). A ``GroupQueue`` moves its
own group entity with ``SubQueues`` directly.
"""

from __future__ import annotations

from troupe.queue.entity import QueuedEntity
from troupe.queue.group_table import GroupTable
from troupe.queue.hints import Strategy
from troupe.queue.sub_queues import QueueName, SubQueues


class Moves:
    def __init__(self, queues: SubQueues, groups: GroupTable) -> None:
        self._queues = queues
        self._groups = groups

    def requeue(
        self, entity: QueuedEntity, strategy: Strategy, event: str, *, admit: bool = True
    ) -> QueueName:
        """Put ``entity`` (in no sub-queue) where ``strategy`` says; see ``SubQueues.requeue``."""
        if (joined := self._groups.absorb(entity, event)) is not None:
            return joined
        return self._queues.requeue(entity, strategy, event, admit=admit)

    def to_active(self, entity: QueuedEntity, event: str, *, admit: bool = True) -> QueueName:
        """Put ``entity`` (in no sub-queue) in the active queue, PreEnqueue permitting."""
        if (joined := self._groups.absorb(entity, event)) is not None:
            return joined
        return self._queues.to_active(entity, event, admit=admit)

    def release_gated(self, entity: QueuedEntity, event: str) -> QueueName:
        """Run PreEnqueue again for a gated entity; release it (after any backoff) if it
        passes."""
        if not self._queues.ungate(entity):
            return "gated"
        return self.requeue(entity, Strategy.AFTER_BACKOFF, event, admit=False)
