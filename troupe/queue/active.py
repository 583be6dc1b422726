"""The active queue: entities ready to be scheduled, best first (upstream ``activeQ``).

``SchedulingQueue`` pushes entities here when they are added, when their backoff
completes and when a cluster event may have made them schedulable;
``SchedulingQueue.pop`` takes the head. The order is QueueSort's ``less``, compared
as keys when the plugin gives its order as one.

Waiting for an entity is an ``asyncio.Event`` set on every push and on close, so
an idle scheduler sleeps instead of polling. Everything runs on one event loop, so
no lock is needed.
"""

from __future__ import annotations

import asyncio

from troupe.queue.entity import LessFunc, QueuedEntity, SortKey
from troupe.queue.heap import EntityHeap


class ActiveQueue(EntityHeap):
    def __init__(self, less: LessFunc, key: SortKey | None = None) -> None:
        super().__init__(less, key)
        self._not_empty = asyncio.Event()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def push(self, entity: QueuedEntity) -> None:
        super().push(entity)
        self._not_empty.set()

    def close(self) -> None:
        """Wake every waiter; ``pop_nowait`` and ``wait_pop`` return None from now on."""
        self._closed = True
        self._not_empty.set()

    def pop_nowait(self) -> QueuedEntity | None:
        if self._closed:
            return None
        return self.pop()

    async def wait_pop(self) -> QueuedEntity | None:
        """The head of the queue, waiting for one if empty; None once closed."""
        while True:
            entity = self.pop_nowait()
            if entity is not None or self._closed:
                return entity
            self._not_empty.clear()
            await self._not_empty.wait()
