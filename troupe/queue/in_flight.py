"""Entities being scheduled, and the cluster events seen meanwhile (upstream ``inFlightPods``).

``SchedulingQueue.pop`` starts a flight, which counts the scheduling cycle
(upstream ``schedulingCycle``: one per pop); the flight ends with
``add_unschedulable_if_not_present`` (the attempt failed) or ``done`` (it
succeeded). A cluster event that arrives while an entity is in flight may be the
very event that makes it schedulable, so the queue logs such events (``Retries``
and ``Intake`` call ``log``); when the attempt fails the entity's queueing hints
are asked about the events logged since its pop, and a QUEUE answer sends it to
backoff instead of the unschedulable pool.

Each logged event carries the scheduling cycle at which it arrived. An entity
popped at cycle ``c`` cares about events logged at cycle ``>= c``; events older
than the oldest flight are dropped, so the log stays as short as the longest
attempt in progress. Events may target one entity only (an update of that pod, a
forced activation): ``target`` is then the entity's ``queue_id``, by which flights
are indexed too. A group entity's flight shares its ``queue_id`` with every
entity of that group, so ``EntityGate`` finds here whether an attempt of the
group is running.

Pod flights also remember the latest informer version of their pod and whether it
was deleted, so a failed attempt requeues the current pod or nothing at all (a
group's ``GroupQueue`` keeps the same for the members of its entity in flight).
A leaf: it imports only ``entity``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from troupe.api.events import ClusterEvent
from troupe.api.podinfo import PodInfo
from troupe.queue.entity import QueuedEntity


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    cycle: int
    event: ClusterEvent
    old: object | None
    new: object | None
    target: str | None = None


@dataclass(slots=True)
class Flight:
    entity: QueuedEntity
    cycle: int
    latest: PodInfo | None = None  # newest informer version, if updated in flight
    deleted: bool = False


class InFlight:
    def __init__(self) -> None:
        # Insertion order is pop order, so the first flight is the oldest.
        self._flights: dict[str, Flight] = {}
        self._log: deque[LoggedEvent] = deque()
        self.cycle = 0

    def __len__(self) -> int:
        return len(self._flights)

    def __contains__(self, queue_id: str) -> bool:
        return queue_id in self._flights

    def get(self, queue_id: str) -> Flight | None:
        return self._flights.get(queue_id)

    def entities(self) -> list[QueuedEntity]:
        """Entities in flight, those whose pod was deleted meanwhile excluded."""
        return [flight.entity for flight in self._flights.values() if not flight.deleted]

    @property
    def logged_events(self) -> int:
        return len(self._log)

    def start(self, entity: QueuedEntity) -> None:
        """A new scheduling cycle starts with ``entity`` in flight."""
        self.cycle += 1
        # A flight left under this key belongs to a deleted pod whose attempt has
        # not reported back yet; the new entity supersedes it.
        self._flights.pop(entity.queue_id, None)
        self._flights[entity.queue_id] = Flight(entity, self.cycle)

    def log(
        self,
        event: ClusterEvent,
        old: object | None,
        new: object | None,
        target: str | None = None,
    ) -> None:
        """Remember ``event`` if an entity it may concern is in flight."""
        if not self._flights or (target is not None and target not in self._flights):
            return
        self._log.append(LoggedEvent(self.cycle, event, old, new, target))

    def events_for(self, flight: Flight) -> list[LoggedEvent]:
        key = flight.entity.queue_id
        return [
            e
            for e in self._log
            if e.cycle >= flight.cycle and (e.target is None or e.target == key)
        ]

    def end(self, queue_id: str, entity: QueuedEntity | None = None) -> Flight | None:
        """End the flight of ``queue_id`` (only if it is ``entity``'s, when given)."""
        flight = self._flights.get(queue_id)
        if flight is None or (entity is not None and flight.entity is not entity):
            return None
        del self._flights[queue_id]
        self._prune()
        return flight

    def _prune(self) -> None:
        if not self._flights:
            self._log.clear()
            return
        oldest = next(iter(self._flights.values())).cycle
        while self._log and self._log[0].cycle < oldest:
            self._log.popleft()
