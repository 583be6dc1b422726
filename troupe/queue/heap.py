"""A binary heap of queued entities with removal by key (upstream ``backend/heap``).

Used by the active queue (ordered by QueueSort) and the backoff queue (ordered by
backoff expiry). Push and pop are O(log n); removal by key is O(1) and lazy: the
heap slot is marked dead and skipped when it reaches the top, and the heap is
compacted once dead slots outnumber live ones.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from troupe.queue.entity import QueuedEntity


class _Slot:
    __slots__ = ("alive", "entity", "less")

    def __init__(self, entity: QueuedEntity, less: Callable[[QueuedEntity, QueuedEntity], bool]):
        self.entity = entity
        self.less = less
        self.alive = True

    def __lt__(self, other: _Slot) -> bool:
        return self.less(self.entity, other.entity)


class EntityHeap:
    """Entities ordered by ``less``; at most one entity per key."""

    def __init__(self, less: Callable[[QueuedEntity, QueuedEntity], bool]) -> None:
        self._less = less
        self._heap: list[_Slot] = []
        self._live: dict[str, _Slot] = {}

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: str) -> bool:
        return key in self._live

    def __iter__(self) -> Iterator[QueuedEntity]:
        """Live entities in no particular order."""
        return (slot.entity for slot in self._live.values())

    def get(self, key: str) -> QueuedEntity | None:
        slot = self._live.get(key)
        return slot.entity if slot else None

    def push(self, entity: QueuedEntity) -> None:
        """Add ``entity``, replacing any entity with the same key.

        Also the way to re-order an entity whose sort fields changed: the old slot is
        dropped and a new one pushed.
        """
        self.remove(entity.key)
        slot = _Slot(entity, self._less)
        self._live[entity.key] = slot
        heapq.heappush(self._heap, slot)

    def remove(self, key: str) -> QueuedEntity | None:
        slot = self._live.pop(key, None)
        if slot is None:
            return None
        slot.alive = False
        if len(self._heap) > 2 * len(self._live) + 16:
            self._compact()
        return slot.entity

    def peek(self) -> QueuedEntity | None:
        self._drop_dead_top()
        return self._heap[0].entity if self._heap else None

    def pop(self) -> QueuedEntity | None:
        self._drop_dead_top()
        if not self._heap:
            return None
        slot = heapq.heappop(self._heap)
        del self._live[slot.entity.key]
        return slot.entity

    def _drop_dead_top(self) -> None:
        while self._heap and not self._heap[0].alive:
            heapq.heappop(self._heap)

    def _compact(self) -> None:
        self._heap = [slot for slot in self._heap if slot.alive]
        heapq.heapify(self._heap)
