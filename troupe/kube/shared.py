"""The informers the scheduler runs: nodes, pods and priority classes.

The CLI builds one ``SharedInformers`` with the scheduler's ``ClusterEventHandlers``,
``start``s it on a ``TaskSupervisor`` and waits for ``wait_for_sync`` before the
scheduling loop pops its first pod (kube-scheduler's ``WaitForCacheSync``). The
pod informer watches all pods: the handlers decide which are queued (ours,
unassigned) and which occupy capacity (assigned). Priority classes only fill a
store other components read. ``healthy`` backs the health endpoint. More informers
(pod groups, workloads) are added with ``add`` before ``start``.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, Protocol

from kubernetes_asyncio.client import ApiClient

from troupe.api.clock import Clock
from troupe.api.objects import Node, Pod, PriorityClass
from troupe.api.tasks import TaskSupervisor
from troupe.kube.informer import Informer, InformerConfig
from troupe.kube.transport import HttpTransport, Transport

PODS_PATH = "/api/v1/pods"
NODES_PATH = "/api/v1/nodes"
PRIORITY_CLASSES_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"


class ClusterHandlers(Protocol):
    """What the informers feed (``troupe.scheduler.service.handlers.ClusterEventHandlers``)."""

    def on_pod_add(self, pod: Pod) -> None: ...
    def on_pod_update(self, old: Pod, new: Pod) -> None: ...
    def on_pod_delete(self, pod: Pod) -> None: ...
    def on_node_add(self, node: Node) -> None: ...
    def on_node_update(self, old: Node, new: Node) -> None: ...
    def on_node_delete(self, node: Node) -> None: ...


class PriorityClassHandlers(Protocol):
    def on_add(self, pc: PriorityClass) -> None: ...
    def on_update(self, old: PriorityClass, new: PriorityClass) -> None: ...
    def on_delete(self, pc: PriorityClass) -> None: ...


class SharedInformers:
    def __init__(
        self,
        api_client: ApiClient | Transport,
        clock: Clock,
        handlers: ClusterHandlers,
        *,
        config: InformerConfig | None = None,
        rng: random.Random | None = None,
        priority_class_handlers: PriorityClassHandlers | None = None,
    ) -> None:
        self.transport: Transport = (
            HttpTransport(api_client) if isinstance(api_client, ApiClient) else api_client
        )
        self._clock = clock
        rng = rng or random.Random()
        self.nodes: Informer[Node] = Informer(
            self.transport,
            NODES_PATH,
            Node,
            clock,
            on_add=handlers.on_node_add,
            on_update=handlers.on_node_update,
            on_delete=handlers.on_node_delete,
            config=config,
            rng=rng,
            name="nodes",
        )
        self.pods: Informer[Pod] = Informer(
            self.transport,
            PODS_PATH,
            Pod,
            clock,
            on_add=handlers.on_pod_add,
            on_update=handlers.on_pod_update,
            on_delete=handlers.on_pod_delete,
            config=config,
            rng=rng,
            name="pods",
        )
        pch = priority_class_handlers
        self.priority_classes: Informer[PriorityClass] = Informer(
            self.transport,
            PRIORITY_CLASSES_PATH,
            PriorityClass,
            clock,
            on_add=pch.on_add if pch else None,
            on_update=pch.on_update if pch else None,
            on_delete=pch.on_delete if pch else None,
            config=config,
            rng=rng,
            name="priorityclasses",
        )
        self.informers: list[Informer[Any]] = [self.nodes, self.pods, self.priority_classes]
        self._started = False

    def add(self, informer: Informer[Any]) -> None:
        if self._started:
            raise RuntimeError(f"informer {informer.name} added after start")
        self.informers.append(informer)

    def start(self, supervisor: TaskSupervisor) -> None:
        self._started = True
        for informer in self.informers:
            supervisor.spawn(informer.run(), name=f"informer {informer.name}")

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()

    @property
    def has_synced(self) -> bool:
        return all(i.has_synced for i in self.informers)

    @property
    def healthy(self) -> bool:
        """Every list/watch loop is running and in contact with the server (or
        reconnecting within ``InformerConfig.unhealthy_after``)."""
        return self._started and all(i.healthy for i in self.informers)

    async def wait_for_sync(self, timeout: float) -> bool:
        """True once every informer has listed; False after ``timeout`` seconds."""
        if self.has_synced:
            return True
        synced: asyncio.Future[Any] = asyncio.ensure_future(
            asyncio.gather(*(i.wait_synced() for i in self.informers))
        )
        timer: asyncio.Future[Any] = asyncio.ensure_future(self._clock.sleep(timeout))
        try:
            await asyncio.wait({synced, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (synced, timer):
                if not fut.done():
                    fut.cancel()
            await asyncio.gather(synced, timer, return_exceptions=True)
        return self.has_synced
