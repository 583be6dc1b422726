"""A binary heap of queued entities with removal by key (upstream ``backend/heap``).

Used by the active queue (ordered by QueueSort) and the backoff queue (ordered by
backoff expiry). Entities are indexed by ``queue_id``. Push and pop are
O(log n); removal is O(1) and lazy: the heap slot is marked dead and skipped when
it reaches the top, and the heap is compacted once dead slots outnumber live ones.

The order is ``less``, or, when the heap is given ``key`` (QueueSort's order as a
key, ``troupe.api.framework.QueueSortKey``), the entities' keys taken when they are
pushed: a pop then compares tuples natively instead of calling ``less`` a dozen
times. Without a key, a dead slot keeps a frozen copy of its entity: the queue
changes a removed entity (an updated pod, a group gaining a member) before pushing
it again, and a dead slot whose sort fields moved under it would break the heap
order for the rest (a key taken at push is frozen already). An entity must not be
changed while it is live in a heap.
"""

from __future__ import annotations

import copy
import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from troupe.queue.entity import QueuedEntity, SortKey


class _Slot:
    __slots__ = ("alive", "entity", "less")

    def __init__(self, entity: QueuedEntity, less: Callable[[QueuedEntity, QueuedEntity], bool]):
        self.entity = entity
        self.less = less
        self.alive = True

    def __lt__(self, other: _Slot) -> bool:
        return self.less(self.entity, other.entity)


# A heap item: (slot,) ordered by the slot's ``less``, or the key's elements, the push
# number and the slot: equal keys (a dead slot and its entity pushed again) fall back
# to push order and never compare the slots. The key is spread into the item while
# every key has the same length (QueueSort's keys do): a pop's dozen comparisons then
# walk one tuple each instead of two, about a third of a pop. A key of another length
# turns the heap to (key, push number, slot) items for good, which order alike.
_Item = tuple[Any, ...]


class EntityHeap:
    """Entities ordered by ``less`` (or ``key``); at most one entity per ``queue_id``."""

    def __init__(
        self, less: Callable[[QueuedEntity, QueuedEntity], bool], key: SortKey | None = None
    ) -> None:
        self._less = less
        self._key = key
        self._pushes = itertools.count()
        self._width = -1  # the length of every key while items are flat; 0: nested
        self._heap: list[_Item] = []
        self._live: dict[str, _Slot] = {}

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, queue_id: str) -> bool:
        return queue_id in self._live

    def __iter__(self) -> Iterator[QueuedEntity]:
        """Live entities in no particular order."""
        return (slot.entity for slot in self._live.values())

    def get(self, queue_id: str) -> QueuedEntity | None:
        slot = self._live.get(queue_id)
        return slot.entity if slot else None

    def push(self, entity: QueuedEntity) -> None:
        """Add ``entity``, replacing any entity with the same ``queue_id``."""
        self.remove(entity.queue_id)
        slot = _Slot(entity, self._less)
        self._live[entity.queue_id] = slot
        item = self._item(entity, slot)  # first: it may replace the heap's list
        heapq.heappush(self._heap, item)

    def _item(self, entity: QueuedEntity, slot: _Slot) -> _Item:
        key = self._key
        if key is None:
            return (slot,)
        k = key(entity)
        if self._width < 0:
            self._width = len(k)  # the first key sets the width
        elif self._width and len(k) != self._width:
            self._nest()
        if self._width:
            return (*k, next(self._pushes), slot)
        return (k, next(self._pushes), slot)

    def _nest(self) -> None:
        """Keys of several lengths: items become (key, push number, slot), which
        compare alike, so the heap stays ordered."""
        width = self._width
        self._heap = [(item[:width], item[width], item[-1]) for item in self._heap]
        self._width = 0

    def remove(self, queue_id: str) -> QueuedEntity | None:
        slot = self._live.pop(queue_id, None)
        if slot is None:
            return None
        entity = slot.entity
        slot.alive = False
        if self._key is None:
            slot.entity = copy.copy(entity)
        if len(self._heap) > 2 * len(self._live) + 16:
            self._compact()
        return entity

    def peek(self) -> QueuedEntity | None:
        self._drop_dead_top()
        return self._heap[0][-1].entity if self._heap else None

    def pop(self) -> QueuedEntity | None:
        self._drop_dead_top()
        if not self._heap:
            return None
        slot: _Slot = heapq.heappop(self._heap)[-1]
        del self._live[slot.entity.queue_id]
        return slot.entity

    def _drop_dead_top(self) -> None:
        heap = self._heap
        while heap and not heap[0][-1].alive:
            heapq.heappop(heap)

    def _compact(self) -> None:
        self._heap = [item for item in self._heap if item[-1].alive]
        heapq.heapify(self._heap)
