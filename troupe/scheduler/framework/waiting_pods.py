"""Pods held at Permit (code WAIT) until every waiting plugin allows them.

The framework adds a pod here when a Permit plugin answers WAIT; the binding cycle
awaits ``WaitingPod.wait()`` before PreBind. Plugins (e.g. a gang barrier) release
it with ``allow`` or fail it with ``reject``; the earliest plugin timeout rejects it,
measured on the injected clock (upstream ``waiting_pods_map.go``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from troupe.api.clock import Clock
from troupe.api.podinfo import PodInfo
from troupe.api.status import SUCCESS, Status
from troupe.api.tasks import TaskSupervisor


class WaitingPod:
    def __init__(self, pod: PodInfo, timeouts: dict[str, float], clock: Clock) -> None:
        self._pod = pod
        self._pending = dict(timeouts)
        self._clock = clock
        # Deadlines run from the Permit decision, not from when the timer task starts.
        self._since = clock.now()
        self._result: asyncio.Future[Status] = asyncio.get_running_loop().create_future()

    @property
    def pod(self) -> PodInfo:
        return self._pod

    @property
    def pending_plugins(self) -> list[str]:
        return sorted(self._pending)

    @property
    def done(self) -> bool:
        return self._result.done()

    def allow(self, plugin: str) -> None:
        self._pending.pop(plugin, None)
        if not self._pending and not self._result.done():
            self._result.set_result(SUCCESS)

    def reject(self, plugin: str, message: str) -> None:
        if not self._result.done():
            self._result.set_result(Status.unschedulable(message, plugin=plugin))

    def on_done(self, callback: Callable[[], object]) -> None:
        self._result.add_done_callback(lambda _: callback())

    async def wait(self) -> Status:
        return await self._result

    async def expire(self) -> None:
        """Reject when the earliest plugin timeout passes (run as an owned task)."""
        if not self._pending:
            return
        plugin, timeout = min(self._pending.items(), key=lambda kv: kv[1])
        await self._clock.sleep(self._since + timeout - self._clock.now())
        self.reject(
            plugin, f"rejected due to timeout after waiting {timeout:g}s at plugin {plugin}"
        )


class WaitingPods:
    def __init__(self, clock: Clock, timers: TaskSupervisor) -> None:
        self._clock = clock
        self._timers = timers
        self._pods: dict[str, WaitingPod] = {}

    def add(self, pod: PodInfo, timeouts: dict[str, float]) -> WaitingPod:
        waiting = WaitingPod(pod, timeouts, self._clock)
        self._pods[pod.key] = waiting
        timer = self._timers.spawn(waiting.expire(), name=f"permit-timeout {pod.key}")
        # Once decided, the timeout has nothing left to do.
        waiting.on_done(timer.cancel)
        return waiting

    def remove(self, key: str) -> None:
        self._pods.pop(key, None)

    def get(self, key: str) -> WaitingPod | None:
        return self._pods.get(key)

    def all(self) -> list[WaitingPod]:
        return list(self._pods.values())

    def __len__(self) -> int:
        return len(self._pods)
