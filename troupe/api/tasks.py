"""TaskSupervisor: every background coroutine the scheduler starts has an owner.

Binding cycles, status patches, events and Permit timers are spawned here instead
of bare ``create_task``: the supervisor keeps a reference, bounds concurrency when
asked, logs and counts failures, and drains or cancels everything on shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

log = structlog.get_logger("troupe.tasks")


class TaskSupervisor:
    def __init__(self, name: str, limit: int = 0) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()
        self._slots = asyncio.Semaphore(limit) if limit > 0 else None
        self._idle = asyncio.Event()
        self._idle.set()
        self.failures = 0
        self.started = 0

    def __len__(self) -> int:
        return len(self._tasks)

    async def acquire(self) -> None:
        """Wait for a free slot (back-pressure for the caller); pair with ``spawn``
        of ``held=True``."""
        if self._slots is not None:
            await self._slots.acquire()

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str = "", held: bool = False
    ) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name or self.name)
        self._tasks.add(task)
        self._idle.clear()
        self.started += 1
        task.add_done_callback(lambda t: self._finished(t, held))
        return task

    def _finished(self, task: asyncio.Task[Any], held: bool) -> None:
        self._tasks.discard(task)
        if not self._tasks:
            self._idle.set()
        if held and self._slots is not None:
            self._slots.release()
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.failures += 1
            log.error(
                "background task failed",
                supervisor=self.name,
                task=task.get_name(),
                error=repr(exc),
                exc_info=exc,
            )

    async def idle(self) -> None:
        """Return once no task is running (at once when none is)."""
        await self._idle.wait()

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait for every task; True when all finished within ``timeout``."""
        if not self._tasks:
            return True
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        return not pending

    async def cancel_all(self) -> None:
        tasks = set(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
