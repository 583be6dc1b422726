"""TaskSupervisor and WorkerPool: every background coroutine the scheduler starts
has an owner.

Status patches, events and Permit timers are spawned on a ``TaskSupervisor``
instead of bare ``create_task``: the supervisor keeps a reference, bounds
concurrency when asked, logs and counts failures, and drains or cancels everything
on shutdown. Binding cycles, one per scheduled pod, run on a ``WorkerPool`` with the
same interface: at most ``limit`` long-lived worker tasks, each running one held
binding at a time, so a binding costs no task of its own (its creation, the
registry of live tasks and two done callbacks were about half the bookkeeping of
handing a pod to its binding cycle).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Coroutine
from typing import Any, Protocol

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


class BoundedSupervisor(Protocol):
    """What the binding cycle needs of its owner: held slots, and coroutines run in
    them (``TaskSupervisor`` with a limit, or ``WorkerPool``)."""

    def __len__(self) -> int: ...

    async def acquire(self) -> None: ...

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str = "", held: bool = False
    ) -> object: ...

    async def idle(self) -> None: ...

    async def drain(self, timeout: float | None = None) -> bool: ...

    async def cancel_all(self) -> None: ...


class WorkerPool:
    """Runs coroutines in held slots on at most ``limit`` worker tasks.

    ``acquire`` waits for a free slot (FIFO); ``spawn`` then runs the coroutine on an
    idle worker, started on first need. A slot is released when its coroutine ends,
    and the worker takes the next coroutine without a task switch of its own.
    Failures are logged and counted as ``TaskSupervisor`` does; ``len`` is the
    number of coroutines running.

    ``refill``: once every slot was taken and a caller waits, slots that come free are
    handed out only when ``refill`` of them are free (or nothing runs). The caller
    (the scheduling loop) then starts that many coroutines in one go, whose requests
    leave together, instead of one for each response that comes back: a server (and
    this process) woken once for several requests spends far less per request than
    one woken for each.

    ``resize`` changes ``limit`` and ``refill`` while the pool runs (the binding
    concurrency follows the API server's latency: ``troupe.scheduler.loop.binding_limit``)."""

    def __init__(self, name: str, limit: int, refill: int = 1) -> None:
        self.name = name
        self.limit = max(1, limit)
        self.refill = min(max(1, refill), self.limit)
        self._free = self.limit  # slots that may be acquired now
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self._workers: set[asyncio.Task[None]] = set()
        self._idle_workers: list[asyncio.Future[Coroutine[Any, Any, Any]]] = []
        self._queued: deque[Coroutine[Any, Any, Any]] = deque()  # none idle: next free one
        self._running = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.failures = 0
        self.started = 0

    def __len__(self) -> int:
        return self._running

    async def acquire(self) -> None:
        if self._free > 0 and not self._slot_waiters:
            self._free -= 1
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(granted)
        try:
            await granted
        except BaseException:
            if granted.done() and not granted.cancelled():
                self._release()  # handed a slot just as we gave up: pass it on
            elif granted in self._slot_waiters:
                self._slot_waiters.remove(granted)
            raise

    def resize(self, limit: int, refill: int = 1) -> None:
        """From now on at most ``limit`` coroutines at once, refilled ``refill`` at a time
        (the binding concurrency follows the API server's latency). Growing grants
        waiters at once; shrinking lets the running coroutines finish and grants no
        slot until fewer than ``limit`` run."""
        limit = max(1, limit)
        self._free += limit - self.limit
        self.limit = limit
        self.refill = min(max(1, refill), limit)
        self._grant()

    def _release(self) -> None:
        self._free += 1
        self._grant()

    def _grant(self) -> None:
        if self._free < self.refill and self._running:
            return  # a waiter is woken once enough slots are free for a batch
        waiters = self._slot_waiters
        while waiters and self._free > 0:
            granted = waiters.popleft()
            if not granted.done():
                self._free -= 1
                granted.set_result(None)  # the slot goes to the longest waiter

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str = "", held: bool = True) -> None:
        """Run ``coro`` in a slot the caller acquired (``held`` is always so here;
        ``name`` is accepted for ``TaskSupervisor``'s signature)."""
        del name, held
        self._running += 1
        self.started += 1
        self._idle.clear()
        if self._idle_workers:
            self._idle_workers.pop().set_result(coro)
        elif len(self._workers) < self.limit:
            worker = asyncio.get_running_loop().create_task(
                self._work(coro), name=f"{self.name} worker"
            )
            self._workers.add(worker)
            worker.add_done_callback(self._workers.discard)
        else:
            self._queued.append(coro)

    async def _work(self, coro: Coroutine[Any, Any, Any]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                await coro
            except asyncio.CancelledError:
                self._done()
                raise
            except Exception as exc:
                self.failures += 1
                log.error(
                    "background task failed",
                    supervisor=self.name,
                    task=getattr(coro, "__qualname__", repr(coro)),
                    error=repr(exc),
                    exc_info=exc,
                )
            self._done()
            if self._queued:
                coro = self._queued.popleft()
                continue
            # Wait for the next coroutine (no await between the slot's release and
            # this: a caller woken by the release finds this worker idle).
            next_job: asyncio.Future[Coroutine[Any, Any, Any]] = loop.create_future()
            self._idle_workers.append(next_job)
            try:
                coro = await next_job
            except asyncio.CancelledError:
                if next_job.done() and not next_job.cancelled():
                    # Handed a coroutine just as it was cancelled: it never starts.
                    next_job.result().close()
                    self._done()
                elif next_job in self._idle_workers:
                    self._idle_workers.remove(next_job)
                raise

    def _done(self) -> None:
        self._running -= 1
        if not self._running:
            self._idle.set()
        self._release()

    async def idle(self) -> None:
        """Return once no coroutine is running (at once when none is)."""
        await self._idle.wait()

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait for every running coroutine; True when all finished within ``timeout``."""
        if not self._running:
            return True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def cancel_all(self) -> None:
        """Cancel the running coroutines (and stop the workers); coroutines waiting
        for a worker are closed unstarted."""
        while self._queued:
            self._queued.popleft().close()
            self._done()
        workers = set(self._workers)
        for worker in workers:
            worker.cancel()
        if workers:
            await asyncio.gather(*workers, return_exceptions=True)
