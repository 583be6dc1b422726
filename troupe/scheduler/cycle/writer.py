"""Status patches and events written in the background by a few workers.

The scheduling loop never waits for these writes, and it must not create a task
per write either: under load that means thousands of tasks queued on the
connection pool ahead of the bindings. ``BackgroundWriter`` keeps:

- pod status patches coalesced per pod (only the latest condition matters; a pod
  failing five times while the API is slow is patched once), and
- events in a bounded FIFO; when it is full the oldest event is dropped and
  counted, as client-go's event broadcaster drops when its buffer is full.

A few workers drain status and merge patches. Events go through one worker of
their own, one write at a time, as client-go's broadcaster writes them. Events
also yield to bindings: while the ``bindings`` supervisor has binding cycles in
flight, the event writer holds its next event until they drain or the event has
waited ``event_hold`` seconds (5 s). Under a burst of bindings the API server's time (and
the scheduler's) then goes to the bindings, which start pods, and the burst's
``Scheduled`` events follow it; under sustained load events run ``event_hold``
seconds behind; in a quiet cluster they are written as they come. (kube-scheduler
gets the same order from its event client's own rate limit, 50 writes/s by
default, so events there trail a burst by far more.) Failures are logged and
counted by the client; nothing here raises into the scheduler.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from typing import Any

import structlog

from troupe.api.client import Event, ObjectRef, SchedulerClient, WriteFenced
from troupe.api.clock import Clock, RealClock
from troupe.api.objects import Pod, PodCondition
from troupe.api.tasks import BoundedSupervisor, TaskSupervisor
from troupe.scheduler.framework.messages import scheduled_message

log = structlog.get_logger("troupe.writer")

_StatusPatch = tuple[Pod, PodCondition | None, str | None]
# A ``Scheduled`` event not built yet: (pod, node, reporting controller).
_Scheduled = tuple[Pod, str, str]


def scheduled_event(pod: Pod, node: str, controller: str) -> Event:
    m = pod.metadata
    return Event(
        ObjectRef.of_pod(pod),
        "Normal",
        "Scheduled",
        "Binding",
        scheduled_message(m.namespace, m.name, node),
        reporting_controller=controller,
    )


EVENT_HOLD_SECONDS = 5.0


class BackgroundWriter:
    def __init__(
        self,
        client: SchedulerClient,
        tasks: TaskSupervisor,
        *,
        workers: int = 4,
        event_capacity: int = 10000,
        bindings: BoundedSupervisor | None = None,
        event_hold: float = EVENT_HOLD_SECONDS,
        clock: Clock | None = None,
    ) -> None:
        self._client = client
        self._tasks = tasks
        self._workers = workers
        self._bindings = bindings
        # Seconds an event yields to bindings in flight at most (the bench's
        # instruction counts hold events until the burst is bound).
        self.event_hold = event_hold
        self._clock = clock or RealClock()
        self._statuses: OrderedDict[str, _StatusPatch] = OrderedDict()
        # Merge patches of other objects (group status), latest per path.
        self._patches: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._events: deque[tuple[float, Event | _Scheduled]] = deque()  # (queued at, event)
        self._capacity = event_capacity
        self._running = 0
        self._event_writer = False
        self.dropped_events = 0
        self.failures = 0

    def pod_status(
        self, pod: Pod, condition: PodCondition | None, nominated_node_name: str | None
    ) -> None:
        key = pod.key
        self._statuses.pop(key, None)
        self._statuses[key] = (pod, condition, nominated_node_name)
        self._kick()

    def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        self._patches.pop(path, None)
        self._patches[path] = patch
        self._kick()

    def scheduled(self, pod: Pod, node: str, controller: str) -> None:
        """The ``Scheduled`` event of ``pod``, bound to ``node``: built when it is
        written, so a burst of bindings does not pay for the events it holds back."""
        self._queue_event((pod, node, controller))

    def event(self, event: Event) -> None:
        self._queue_event(event)

    def _queue_event(self, event: Event | _Scheduled) -> None:
        if len(self._events) >= self._capacity:
            self._events.popleft()
            self.dropped_events += 1
        self._events.append((self._clock.now(), event))
        if not self._event_writer:
            self._event_writer = True
            self._tasks.spawn(self._write_events(), name="event writer")

    def _kick(self) -> None:
        if self._running < self._workers:
            self._running += 1
            self._tasks.spawn(self._work(), name="background writer")

    @property
    def pending(self) -> int:
        return len(self._statuses) + len(self._patches) + len(self._events)

    @property
    def busy(self) -> bool:
        return bool(self._running or self._event_writer)

    async def _work(self) -> None:
        try:
            while self._statuses or self._patches:
                if self._statuses:
                    _, (pod, condition, nominated) = self._statuses.popitem(last=False)
                    await self._write(self._client.patch_pod_status(pod, condition, nominated))
                else:
                    path, patch = self._patches.popitem(last=False)
                    await self._write(self._client.merge_patch(path, patch))
        finally:
            self._running -= 1

    async def _write_events(self) -> None:
        try:
            while self._events:
                await self._hold_for_bindings()
                if not self._events:
                    break
                _, event = self._events.popleft()
                if not isinstance(event, Event):
                    event = scheduled_event(*event)
                await self._write(self._client.record_event(event))
        finally:
            self._event_writer = False

    async def _hold_for_bindings(self) -> None:
        """Wait while bindings are in flight, until the oldest event has waited
        ``event_hold`` seconds."""
        bindings = self._bindings
        while bindings is not None and self._events and len(bindings):
            left = self.event_hold - (self._clock.now() - self._events[0][0])
            if left <= 0:
                return
            idle = asyncio.ensure_future(bindings.idle())
            timer = asyncio.ensure_future(self._clock.sleep(left))
            try:
                await asyncio.wait((idle, timer), return_when=asyncio.FIRST_COMPLETED)
            finally:
                idle.cancel()
                timer.cancel()

    async def _write(self, call: object) -> None:
        try:
            await call  # type: ignore[misc]
        except asyncio.CancelledError:
            raise
        except WriteFenced:
            # The lease is lost and the elector has said so once: not sent, as
            # every write after it.
            self.failures += 1
        except Exception as exc:
            self.failures += 1
            log.warning("background write failed", error=repr(exc))

    async def flush(self, timeout: float) -> bool:
        """Wait until everything queued is written (or ``timeout``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.pending or self.busy:
            if loop.time() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True
