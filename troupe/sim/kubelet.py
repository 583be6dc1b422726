"""Simulated kubelets: one in-process task running a kubelet for every node of the store.

Like KWOK, it takes every Node however it was created (a ``NodeSpec`` of the
``SimCluster``, ``kubectl apply``, any client; before or after the task started), unless
the node opts out with the annotation ``troupe.dev/kubelet: none`` (``KUBELET_ANNOTATION``);
a node deleted, or annotated later, is let go. For a node it takes:

* fills in the status a kubelet reports when the node lacks it (capacity, allocatable
  from capacity, conditions, addresses, kubelet endpoint, ``nodeInfo``) and sets
  ``Ready`` True (reason KubeletReady), writing only if something changed;
* every ``heartbeat`` seconds (staggered per node) stamps ``lastHeartbeatTime`` on the
  node's conditions, as a kubelet's status report does;

and it follows pods through an in-process store subscription (no HTTP). For pods bound
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
import zlib
from collections.abc import Callable
from typing import Any, Final

from troupe.api.clock import Clock
from troupe.sim.apiserver.machinery.errors import ApiError
from troupe.sim.apiserver.machinery.meta import rfc3339
from troupe.sim.apiserver.storage.store import DELETED, MODIFIED, Obj, Store
from troupe.sim.nodespec import NodeSpec, internal_ip, node_conditions, node_info

RUN_SECONDS_ANNOTATION: Final = "troupe.dev/run-seconds"
# A node annotated ``troupe.dev/kubelet: none`` gets no simulated kubelet: its pods stay
# Pending and its graceful deletes Terminating, as on a node whose kubelet is down.
KUBELET_ANNOTATION: Final = "troupe.dev/kubelet"
NO_KUBELET: Final = "none"
HEARTBEAT_SECONDS: Final = 60.0
_START, _FINISH, _REMOVE = "start", "finish", "remove"
_TAKE, _HEARTBEAT = "take", "heartbeat"
_NODE_ACTIONS: Final = frozenset({_TAKE, _HEARTBEAT})
log = logging.getLogger(__name__)


def opted_out(node: Obj) -> bool:
    """Whether the node asks for no simulated kubelet."""
    annotations = node["metadata"].get("annotations") or {}
    return str(annotations.get(KUBELET_ANNOTATION, "")).lower() == NO_KUBELET


def _run_seconds(pod: Obj) -> float | None:
    raw = (pod["metadata"].get("annotations") or {}).get(RUN_SECONDS_ANNOTATION)
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        return None


class Kubelets:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        delay: float = 0.0,
        heartbeat: float | None = HEARTBEAT_SECONDS,
    ) -> None:
        """``heartbeat``: seconds between a node's status heartbeats (None: none)."""
        self.store = store
        self.clock = clock
        self.delay = delay
        self.heartbeat = heartbeat
        # The nodes run, by name: the token of the take (node UID and a generation),
        # which their node timers carry so a node deleted and created again, or let go
        # and taken again, keeps one heartbeat.
        self.nodes: dict[str, str] = {}
        self._takes = itertools.count()
        # Pods seen bound to a node without a kubelet (not created yet, opted out, let
        # go): its kubelet looks at them when it takes the node.
        self._orphans: dict[str, dict[tuple[str, str, str], None]] = {}
        self._addresses = itertools.count()
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

    def _schedule_node(self, delay: float, action: str, name: str, token: str) -> None:
        due = self.clock.now() + delay
        heapq.heappush(self._timers, (due, next(self._seq), action, "", name, token))
        self._wake.set()

    def next_address(self) -> str:
        """A fresh InternalIP (10.0.0.1, 10.0.0.2, ...) for a node of the cluster."""
        return internal_ip(next(self._addresses))

    def _on_node(self, type_: str, node: Obj) -> None:
        """Take a node, or let it go (called synchronously on every node change)."""
        meta = node["metadata"]
        name = meta["name"]
        if type_ == DELETED or opted_out(node):
            if self.nodes.pop(name, None) is not None:
                log.debug("kubelet of node %s stopped", name)
            return
        token = self.nodes.get(name)
        if token is not None and token.partition("#")[0] == meta["uid"]:
            return
        token = f"{meta['uid']}#{next(self._takes)}"
        self.nodes[name] = token
        self._schedule_node(0.0, _TAKE, name, token)

    def _observe(self, type_: str, pod: Obj) -> None:
        """Decide what the pod's node will do about this change."""
        meta = pod["metadata"]
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        if type_ == DELETED:
            orphans = self._orphans.get(node)
            if orphans is not None:
                orphans.pop((meta["namespace"], meta["name"], meta["uid"]), None)
                if not orphans:
                    del self._orphans[node]
            return
        if node not in self.nodes:
            self._orphan(pod)
            return
        if meta.get("deletionTimestamp"):
            self._schedule(self.delay, _REMOVE, pod)
        elif (pod.get("status") or {}).get("phase", "Pending") == "Pending":
            self._schedule(self.delay, _START, pod)

    def _orphan(self, pod: Obj) -> None:
        meta = pod["metadata"]
        orphans = self._orphans.setdefault(pod["spec"]["nodeName"], {})
        orphans[meta["namespace"], meta["name"], meta["uid"]] = None

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

    # --- nodes -------------------------------------------------------------------------

    def _current_node(self, name: str, token: str) -> Obj | None:
        if self.nodes.get(name) != token:
            return None  # deleted, let go, or taken again since
        node = self.store.find(self.store.resolve("nodes"), "", name)
        if node is None or node["metadata"]["uid"] != token.partition("#")[0]:
            return None
        return node

    def _write_node_status(self, node: Obj, status: dict[str, Any]) -> None:
        self.store.update("nodes", {**node, "status": status}, subresource="status", copy=False)

    def _take(self, node: Obj, token: str) -> None:
        name = node["metadata"]["name"]
        status = dict(node.get("status") or {})
        reported = self._reported_status(name, status)
        if reported != status:
            now = rfc3339(self.clock.wall())
            reported["conditions"] = [
                {**c, "lastHeartbeatTime": now} for c in reported["conditions"]
            ]
            self._write_node_status(node, reported)
        # Pods bound to it before it was taken (or before it existed).
        for namespace, pod_name, uid in self._orphans.pop(name, {}):
            pod = self._current(namespace, pod_name, uid)
            if pod is not None and pod["spec"].get("nodeName") == name:
                self._observe(MODIFIED, pod)
        if self.heartbeat is not None and self.heartbeat > 0:
            # Staggered by name, so nodes created together do not report together.
            spread = zlib.crc32(name.encode()) / 2**32
            self._schedule_node(self.heartbeat * (1.0 + spread), _HEARTBEAT, name, token)

    def _reported_status(self, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """The node's status with what a kubelet reports filled in where missing, and
        Ready True."""
        now = rfc3339(self.clock.wall())
        reported = dict(status)
        if not reported.get("capacity"):
            reported["capacity"] = NodeSpec(count=1).capacity()
        if not reported.get("allocatable"):
            reported["allocatable"] = dict(reported["capacity"])
        if not reported.get("addresses"):
            reported["addresses"] = [
                {"type": "InternalIP", "address": self.next_address()},
                {"type": "Hostname", "address": name},
            ]
        if not reported.get("daemonEndpoints"):
            reported["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10250}}
        if not reported.get("nodeInfo"):
            reported["nodeInfo"] = node_info(name)
        conditions = list(reported.get("conditions") or [])
        present = {c.get("type") for c in conditions}
        conditions += [c for c in node_conditions(now) if c["type"] not in present]
        reported["conditions"] = [
            c
            if c.get("type") != "Ready" or c.get("status") == "True"
            else {
                **c,
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastTransitionTime": now,
            }
            for c in conditions
        ]
        if reported["conditions"] == (status.get("conditions") or []):
            reported["conditions"] = status["conditions"]
        return reported

    def _heartbeat(self, node: Obj, token: str) -> None:
        now = rfc3339(self.clock.wall())
        status = dict(node.get("status") or {})
        status["conditions"] = [
            {**c, "lastHeartbeatTime": now} for c in status.get("conditions") or []
        ]
        self._write_node_status(node, status)
        assert self.heartbeat is not None
        self._schedule_node(self.heartbeat, _HEARTBEAT, node["metadata"]["name"], token)

    def _fire_node(self, action: str, name: str, token: str) -> None:
        node = self._current_node(name, token)
        if node is None:
            return
        try:
            (self._take if action == _TAKE else self._heartbeat)(node, token)
        except ApiError as error:  # deleted meanwhile: its DELETED event lets it go
            log.debug("kubelet %s node %s: %s", action, name, error)

    def _fire(self, action: str, namespace: str, name: str, uid: str) -> None:
        if action in _NODE_ACTIONS:
            self._fire_node(action, name, uid)
            return
        pod = self._current(namespace, name, uid)
        if pod is None:
            return
        if pod["spec"].get("nodeName") not in self.nodes:
            self._orphan(pod)  # its node's kubelet stopped meanwhile
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
        """Run the nodes' kubelets until cancelled."""
        # Nodes are taken synchronously as they are written, so a pod bound right after
        # its node was created finds the node's kubelet; those already there, now.
        stop_listening = self.store.listen("nodes", self._on_node)
        try:
            for node in self.store.list("nodes", copy=False):
                self._on_node("ADDED", node)
            async with asyncio.TaskGroup() as group:
                group.create_task(self._follow())
                group.create_task(self._timers_loop())
        finally:
            stop_listening()
            self.nodes.clear()

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
