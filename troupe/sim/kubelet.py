"""Simulated kubelets: one in-process task for every node of a ``SimCluster``.

It follows pods through an in-process store subscription (no HTTP) and, for pods bound
to a node it runs:

* after ``delay`` seconds moves a Pending pod to Running: ``startTime``, ``hostIP``,
  ``podIP``, conditions PodReadyToStartContainers/Initialized/Ready/ContainersReady/
  PodScheduled True, one running ``containerStatuses`` entry per container;
* if the pod has the annotation ``troupe.dev/run-seconds``, that many seconds after it
  started moves it to Succeeded (containers terminated with exit code 0, reason
  Completed; Ready and ContainersReady False with reason PodCompleted), as a
  run-to-completion job ends;
* finishes graceful deletes (deletionTimestamp set) after ``delay``, deleting with grace
  period 0 as the real kubelet does once the containers are gone.

Time comes from an injected ``Clock`` so tests drive it with ``FakeClock``. Created and
owned by ``SimCluster``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable
from typing import Any, Final

from troupe.api.clock import Clock
from troupe.sim.apiserver.errors import ApiError
from troupe.sim.apiserver.meta import rfc3339
from troupe.sim.apiserver.store import Obj, Store

RUN_SECONDS_ANNOTATION: Final = "troupe.dev/run-seconds"
_START, _FINISH, _REMOVE = "start", "finish", "remove"
log = logging.getLogger(__name__)


def _run_seconds(pod: Obj) -> float | None:
    raw = (pod["metadata"].get("annotations") or {}).get(RUN_SECONDS_ANNOTATION)
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        return None


class Kubelets:
    def __init__(self, store: Store, clock: Clock, *, delay: float = 0.0) -> None:
        self.store = store
        self.clock = clock
        self.delay = delay
        self.nodes: set[str] = set()
        self._timers: list[tuple[float, int, str, str, str, str]] = []
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._pod_ips = itertools.count(1)
        self.failures = 0

    # --- bookkeeping -------------------------------------------------------------------

    def _schedule(self, delay: float, action: str, pod: Obj) -> None:
        meta = pod["metadata"]
        due = self.clock.now() + delay
        heapq.heappush(
            self._timers,
            (due, next(self._seq), action, meta["namespace"], meta["name"], meta["uid"]),
        )
        self._wake.set()

    def _observe(self, type_: str, pod: Obj) -> None:
        """Decide what the pod's node will do about this change."""
        if type_ == "DELETED":
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if node not in self.nodes:
            return
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            self._schedule(self.delay, _REMOVE, pod)
        elif (pod.get("status") or {}).get("phase", "Pending") == "Pending":
            self._schedule(self.delay, _START, pod)

    # --- actions -----------------------------------------------------------------------

    def _current(self, namespace: str, name: str, uid: str) -> Obj | None:
        pod = self.store.find(self.store.resolve("pods"), namespace, name)
        return pod if pod is not None and pod["metadata"]["uid"] == uid else None

    def _write_status(self, pod: Obj, status: dict[str, Any]) -> None:
        self.store.update("pods", {**pod, "status": status}, subresource="status", copy=False)

    def _start(self, pod: Obj) -> None:
        if pod["metadata"].get("deletionTimestamp") or pod["status"].get("phase") != "Pending":
            return
        now = rfc3339(self.clock.wall())
        n = next(self._pod_ips)
        conditions = [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
        ]
        scheduled = [
            c for c in pod["status"].get("conditions") or [] if c.get("type") == "PodScheduled"
        ]
        conditions.append(
            scheduled[0]
            if scheduled
            else {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now,
            }
        )
        status = {
            **pod["status"],
            "phase": "Running",
            "conditions": conditions,
            "hostIP": self._host_ip(pod["spec"]["nodeName"]),
            "podIP": f"10.{128 + ((n >> 16) & 63)}.{(n >> 8) & 255}.{n & 255}",
            "startTime": now,
            "containerStatuses": [
                {
                    "name": c.get("name", ""),
                    "image": c.get("image", ""),
                    "imageID": "",
                    "containerID": f"sim://{pod['metadata']['uid']}/{c.get('name', '')}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for c in pod["spec"].get("containers") or []
            ],
        }
        self._write_status(pod, status)
        seconds = _run_seconds(pod)
        if seconds is not None:
            self._schedule(seconds, _FINISH, pod)

    def _finish(self, pod: Obj) -> None:
        if pod["metadata"].get("deletionTimestamp") or pod["status"].get("phase") != "Running":
            return
        now = rfc3339(self.clock.wall())
        conditions = []
        for condition in pod["status"].get("conditions") or []:
            if condition.get("type") in ("Ready", "ContainersReady", "PodReadyToStartContainers"):
                condition = {
                    **condition,
                    "status": "False",
                    "reason": "PodCompleted",
                    "lastTransitionTime": now,
                }
            conditions.append(condition)
        statuses = [
            {
                **cs,
                "ready": False,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": cs.get("state", {}).get("running", {}).get("startedAt", now),
                        "finishedAt": now,
                        "containerID": cs.get("containerID", ""),
                    }
                },
            }
            for cs in pod["status"].get("containerStatuses") or []
        ]
        status = {
            **pod["status"],
            "phase": "Succeeded",
            "conditions": conditions,
            "containerStatuses": statuses,
        }
        self._write_status(pod, status)

    def _remove(self, pod: Obj) -> None:
        meta = pod["metadata"]
        self.store.delete(
            "pods",
            meta["name"],
            meta["namespace"],
            grace_period_seconds=0,
            preconditions={"uid": meta["uid"]},
            copy=False,
        )

    def _host_ip(self, node: str) -> str:
        obj = self.store.find(self.store.resolve("nodes"), "", node)
        for address in ((obj or {}).get("status") or {}).get("addresses") or []:
            if address.get("type") == "InternalIP":
                return str(address.get("address", ""))
        return ""

    def _fire(self, action: str, namespace: str, name: str, uid: str) -> None:
        pod = self._current(namespace, name, uid)
        if pod is None:
            return
        handlers: dict[str, Callable[[Obj], None]] = {
            _START: self._start,
            _FINISH: self._finish,
            _REMOVE: self._remove,
        }
        try:
            handlers[action](pod)
        except ApiError as error:  # a concurrent write won; the next event re-decides
            log.debug("kubelet %s %s/%s: %s", action, namespace, name, error)

    # --- loop --------------------------------------------------------------------------

    async def run(self) -> None:
        """Follow pods until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._follow())
            group.create_task(self._timers_loop())

    async def _follow(self) -> None:
        async with self.store.subscribe("pods", initial=True, copy=False) as pods:
            async for type_, pod in pods:
                self._observe(type_, pod)

    async def _timers_loop(self) -> None:
        while True:
            if not self._timers:
                self._wake.clear()
                await self._wake.wait()
                continue
            due = self._timers[0][0]
            now = self.clock.now()
            if due <= now:
                _, _, action, namespace, name, uid = heapq.heappop(self._timers)
                try:
                    self._fire(action, namespace, name, uid)
                except Exception:  # keep the node alive; count and log what broke
                    self.failures += 1
                    log.exception("kubelet %s %s/%s failed", action, namespace, name)
                if not self._timers or self._timers[0][0] > now:
                    await asyncio.sleep(0)  # let watchers and handlers run between batches
                continue
            self._wake.clear()
            sleeper = asyncio.ensure_future(self.clock.sleep(due - now))
            waker = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (sleeper, waker):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
