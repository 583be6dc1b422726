"""The backoff queue: entities waiting out a penalty before retrying (upstream ``backoffQ``).

An entity that failed an attempt is not retried at once: its backoff is
``initial * 2^(attempts-1)`` seconds, capped at ``max`` (kube-scheduler's
podInitialBackoffSeconds / podMaxBackoffSeconds, 1 s and 10 s by default),
counted from the failure. ``SchedulingQueue`` stamps ``backoff_expiry`` when the
attempt fails and pushes the entity here when it must wait;
``SchedulingQueue.flush_backoff_completed`` (every second) moves the entities whose
expiry passed to the active queue.

The heap is ordered by expiry, ties broken by QueueSort, so entities completing
together enter the active queue in a stable order.
"""

from __future__ import annotations

from troupe.api.clock import Clock
from troupe.queue.entity import LessFunc, QueuedEntity
from troupe.queue.heap import EntityHeap


def backoff_duration(attempts: int, initial: float, maximum: float) -> float:
    """Seconds of backoff after ``attempts`` attempts (0 before the first attempt)."""
    if attempts <= 0 or initial <= 0:
        return 0.0
    duration = initial
    for _ in range(attempts - 1):
        # Doubling stops at the cap, so a pod with thousands of attempts never
        # computes 2**1000 (upstream guards the same overflow).
        if duration >= maximum:
            break
        duration *= 2
    return min(duration, maximum)


class BackoffQueue:
    def __init__(self, clock: Clock, less: LessFunc, initial: float, maximum: float) -> None:
        if initial < 0 or maximum < initial:
            raise ValueError(f"backoff: need 0 <= initial ({initial}) <= max ({maximum}) seconds")
        self._clock = clock
        self.initial = initial
        self.maximum = maximum

        def expires_first(a: QueuedEntity, b: QueuedEntity) -> bool:
            if a.backoff_expiry != b.backoff_expiry:
                return a.backoff_expiry < b.backoff_expiry
            return less(a, b)

        self._heap = EntityHeap(expires_first)

    def duration(self, entity: QueuedEntity) -> float:
        return backoff_duration(entity.attempts, self.initial, self.maximum)

    def start_backoff(self, entity: QueuedEntity) -> None:
        """Stamp the expiry of the backoff that starts now (after a failed attempt)."""
        entity.backoff_expiry = self._clock.now() + self.duration(entity)

    def is_backing_off(self, entity: QueuedEntity) -> bool:
        return entity.backoff_expiry > self._clock.now()

    def __len__(self) -> int:
        return len(self._heap)

    def __contains__(self, key: str) -> bool:
        return key in self._heap

    def entities(self) -> list[QueuedEntity]:
        return list(self._heap)

    def get(self, key: str) -> QueuedEntity | None:
        return self._heap.get(key)

    def add(self, entity: QueuedEntity) -> None:
        self._heap.push(entity)

    def remove(self, key: str) -> QueuedEntity | None:
        return self._heap.remove(key)

    def pop_completed(self) -> list[QueuedEntity]:
        """Remove and return, earliest first, every entity whose backoff is over."""
        now = self._clock.now()
        done: list[QueuedEntity] = []
        while (head := self._heap.peek()) is not None and head.backoff_expiry <= now:
            self._heap.pop()
            done.append(head)
        return done
