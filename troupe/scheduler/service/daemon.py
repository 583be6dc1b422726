"""The scheduler as a running service: connect, sync informers, schedule, shut down.

``SchedulerDaemon`` is what ``troupe run`` runs in a cluster and what ``troupe sim``
runs against the embedded cluster — the same code path, over HTTP, in both. It
owns every task it starts (informers, the scheduling loop, the event flusher) and
stops in order on ``stop()``: stop popping, let in-flight bindings finish within
the grace period (cancelled ones unreserve and forget), stop the watches, close
the connection pool. Before the first pod is popped, every informer has listed:
pods, nodes, the served gang kinds, and one informer per resource the profiles'
plugins watch and the cluster serves (``troupe.kube.object_informers``).

Each daemon has its own Prometheus registry (``metrics_registry``: the scheduler's
metrics plus the process collectors); ``troupe run`` and ``troupe sim --serve`` serve
it, with ``healthy`` and ``ready``, through ``troupe.kube.health``.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from troupe.api.client import ObjectRef
from troupe.api.clock import Clock, RealClock
from troupe.api.config import ResolvedConfig
from troupe.api.framework import NamespaceLabels
from troupe.api.gangapi_kinds import GroupObject
from troupe.api.gangs import GangApi
from troupe.api.objects import Pod, PriorityClass
from troupe.api.tasks import TaskSupervisor
from troupe.api.watches import SharedWatch
from troupe.kube import (
    EventRecorder,
    KubeClient,
    SharedInformers,
    check_reachable,
    connect,
)
from troupe.kube.fence import FencedTransport, WriteFence
from troupe.kube.gang_informers import add_gang_informers
from troupe.kube.namespace_informer import namespace_informer
from troupe.kube.object_informers import add_object_informers
from troupe.kube.pdb_informer import pdb_informer
from troupe.kube.transport import USER_AGENT, HttpTransport, observe_requests
from troupe.plugins.registry import Registry, default_registry
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.gangs.status import PodGroupStatusController
from troupe.scheduler.loop.schedule_one import Scheduler
from troupe.scheduler.observe.metrics import SchedulerMetrics
from troupe.scheduler.observe.stats import AttemptStats
from troupe.scheduler.service.gc_tuning import freeze_long_lived, tune_gc
from troupe.scheduler.service.handlers import ClusterEventHandlers
from troupe.scheduler.service.wiring import Options, Wired, build_scheduler

log = structlog.get_logger("troupe.daemon")


class StartupError(RuntimeError):
    """The daemon cannot start (unreachable API server, caches never synced)."""


@dataclass(frozen=True, slots=True)
class Connection:
    kubeconfig: str | None = None
    master: str | None = None
    in_cluster: bool = False
    user_agent: str = USER_AGENT


def instance_name() -> str:
    """This replica's identity in events and leases (the pod name in a cluster)."""
    return os.environ.get("POD_NAME") or socket.gethostname()


class SchedulerDaemon:
    def __init__(
        self,
        config: ResolvedConfig,
        connection: Connection,
        *,
        registry: Registry | None = None,
        clock: Clock | None = None,
        sync_timeout: float = 60.0,
        seed: int | None = None,
        stats: AttemptStats | None = None,
        fence: WriteFence | None = None,
        options: Options | None = None,
    ) -> None:
        self.config = config
        self.connection = connection
        self.registry = registry or default_registry()
        self.clock = clock or RealClock()
        self.sync_timeout = sync_timeout
        self.seed = seed
        # In-process attempt statistics. By default counts only: a daemon runs for
        # months, and lists of per-attempt latencies would grow with every pod ever
        # scheduled (the Prometheus histograms hold the distribution). Benchmarks that
        # read latencies pass their own AttemptStats().
        self.stats = stats if stats is not None else AttemptStats(keep_latencies=False)
        # May a write be sent now? (``LeaderElector.fence`` under leader election.)
        self.fence = fence
        self.tasks = TaskSupervisor("daemon")
        self.scheduler: Scheduler | None = None
        self.wired: Wired | None = None
        # How the scheduler's parts are tuned (benchmarks hold events back, say).
        self.options = options or Options()
        self.informers: SharedInformers | None = None
        self.client: KubeClient | None = None
        self.status_controller: PodGroupStatusController | None = None
        self.gang_apis: dict[GangApi, str] = {}
        # The resources plugins watch that the cluster serves (one informer each).
        self.watched_objects: list[SharedWatch] = []
        self._api: object | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self.server_version = ""
        self.metrics = SchedulerMetrics.for_process()

    @property
    def metrics_registry(self) -> CollectorRegistry:
        """What ``/metrics`` serves for this scheduler."""
        return self.metrics.registry

    async def start(self) -> None:
        tune_gc()
        api = await self._connect()
        client = self.client = self._client(api)
        priority_classes = PriorityClassValues()
        directory = GangDirectory(priority_of=priority_classes.values.get)
        priority_classes.changed.append(directory.priority_classes_changed)
        namespaces = NamespaceLabels()
        seed = self.seed if self.seed is not None else int.from_bytes(os.urandom(4), "big")
        wired = self.wired = build_scheduler(
            self.config,
            self.registry,
            client,
            self.clock,
            options=replace(self.options, seed=seed),
            groups=directory,
            metrics=self.metrics,
            stats=self.stats,
            namespaces=namespaces,
        )
        self.scheduler = wired.scheduler
        informers: SharedInformers | None = None
        status = self.status_controller = PodGroupStatusController(
            client.merge_patch,
            self.clock,
            supervisor=self.tasks,
            synced=lambda: informers is not None and informers.has_synced,
            ours=wired.profiles.owns,
        )
        handlers = wired.handlers(PodListeners(status, client.events))
        informers = self.informers = SharedInformers(
            api, self.clock, handlers, priority_class_handlers=priority_classes
        )
        informers.add(pdb_informer(informers.transport, self.clock, wired.pdbs))
        informers.add(namespace_informer(informers.transport, self.clock, namespaces, handlers))
        on_add, on_update, on_delete = _group_handlers(handlers, status)
        self.gang_apis = await add_gang_informers(
            informers, self.clock, on_add=on_add, on_update=on_update, on_delete=on_delete
        )
        directory.watch_versions(self.gang_apis)
        # The API objects the profiles' plugins watch (none: no request at all).
        self.watched_objects = await add_object_informers(
            informers, self.clock, wired.object_watches, handlers
        )
        informers.start(self.tasks)
        self.tasks.spawn(client.run(), name="event series")
        if not await informers.wait_for_sync(self.sync_timeout):
            await self.stop()
            raise StartupError(
                f"caches did not sync within {self.sync_timeout:g}s from {api.configuration.host}"
            )
        # Everything alive now (cache, plugins, queue) stays alive: keep it out of
        # the collector's full passes.
        freeze_long_lived()
        log.info(
            "caches synced, scheduling",
            server=api.configuration.host,
            serverVersion=self.server_version,
            nodes=wired.cache.node_count,
            profiles=[p.scheduler_name for p in self.config.profiles],
            gangApis=sorted(self.gang_apis.values()),
            pluginObjects=[str(w.kind) for w in self.watched_objects],
        )
        self._loop_task = asyncio.get_running_loop().create_task(
            wired.scheduler.run(), name="schedule_one loop"
        )

    async def _connect(self) -> Any:
        """The API client of the connection, once the server answered."""
        c = self.connection
        api = await connect(
            c.kubeconfig,
            c.master,
            c.in_cluster,
            # Room for every binding the slots may grow to (opened as needed).
            pool_size=max(8, self.config.max_binding_concurrency),
            user_agent=c.user_agent,
        )
        self._api = api
        observe_requests(api, self.metrics.rest_request)
        try:
            self.server_version = await check_reachable(api)
        except BaseException:
            await api.close()
            raise
        return api

    def _client(self, api: Any) -> KubeClient:
        profile = self.config.profiles[0]
        cc = self.config.client_connection
        writes: HttpTransport | FencedTransport = HttpTransport(api)
        if self.fence is not None:
            # Under leader election: no write leaves unless the lease is provably ours.
            writes = FencedTransport(writes, self.fence)
        return KubeClient(
            writes,
            self.clock,
            qps=cc.qps,
            burst=cc.burst,
            scheduler_name=profile.scheduler_name,
            instance=instance_name(),
        )

    async def wait(self) -> None:
        """Until the scheduling loop ends (after ``stop``), re-raising its failure."""
        if self._loop_task is not None:
            await self._loop_task

    def explain(
        self, kind: str, namespace: str, name: str, sub: str = ""
    ) -> dict[str, object] | None:
        """The last failed attempt of a pending pod (``kind`` "pod") or group
        ("podgroup"; ``sub``: a Workload's ``podGroup[/replica]``), or None."""
        if self.wired is None:
            return None
        found = self.wired.explanations
        if kind == "pod":
            return found.pod(f"{namespace}/{name}")
        return found.group(namespace, name, sub)

    @property
    def healthy(self) -> bool:
        loop_alive = self._loop_task is not None and not self._loop_task.done()
        return loop_alive and self.informers is not None and self.informers.healthy

    @property
    def ready(self) -> bool:
        return self.informers is not None and self.informers.has_synced

    async def stop(self, grace: float = 10.0) -> None:
        if self.scheduler is not None:
            await self.scheduler.stop(grace=grace)
        if self._loop_task is not None:
            await asyncio.gather(self._loop_task, return_exceptions=True)
        if self.informers is not None:
            self.informers.stop()
        if self.status_controller is not None:
            await self.status_controller.close()
        # What is left are watch loops blocked on a read and the event flusher:
        # nothing worth waiting for once the scheduler has stopped.
        await self.tasks.drain(timeout=0.2)
        await self.tasks.cancel_all()
        api = self._api
        self._api = None
        if api is not None:
            await api.close()  # type: ignore[attr-defined]
        log.info("scheduler stopped")


def _group_handlers(
    handlers: ClusterEventHandlers, status: PodGroupStatusController
) -> tuple[
    Callable[[GangApi, GroupObject], None],
    Callable[[GangApi, GroupObject, GroupObject], None],
    Callable[[GangApi, GroupObject], None],
]:
    """The gang informers' callbacks: every group object to the handlers, and the
    scheduler-plugins PodGroups to the status controller too."""

    def group_added(gang_api: GangApi, obj: GroupObject) -> None:
        handlers.on_group_add(gang_api, obj)
        if gang_api is GangApi.COSCHEDULING:
            status.on_group_add(obj)  # type: ignore[arg-type]

    def group_updated(gang_api: GangApi, old: GroupObject, new: GroupObject) -> None:
        handlers.on_group_update(gang_api, old, new)
        if gang_api is GangApi.COSCHEDULING:
            status.on_group_update(old, new)  # type: ignore[arg-type]

    def group_deleted(gang_api: GangApi, obj: GroupObject) -> None:
        handlers.on_group_delete(gang_api, obj)
        if gang_api is GangApi.COSCHEDULING:
            status.on_group_delete(obj)  # type: ignore[arg-type]

    return group_added, group_updated, group_deleted


@dataclass(frozen=True, slots=True)
class PodListeners:
    """What follows every pod besides the scheduler: the PodGroup status controller,
    and the event recorder, which forgets a pod's event series once the pod is
    deleted (a deleted pod's UID never comes back, so nothing could repeat them)."""

    status: PodGroupStatusController
    events: EventRecorder

    def on_pod_add(self, pod: Pod) -> None:
        self.status.on_pod_add(pod)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        self.status.on_pod_update(old, new)

    def on_pod_delete(self, pod: Pod) -> None:
        self.status.on_pod_delete(pod)
        self.events.forget(ObjectRef.of_pod(pod))


class PriorityClassValues:
    """PriorityClass name -> value, for group priorities (``priorityClassName``)."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}
        self.changed: list[Callable[[], None]] = []

    def _notify(self) -> None:
        for callback in self.changed:
            callback()

    def on_add(self, pc: PriorityClass) -> None:
        self.values[pc.metadata.name] = pc.value
        self._notify()

    def on_update(self, old: PriorityClass, new: PriorityClass) -> None:
        self.on_add(new)

    def on_delete(self, pc: PriorityClass) -> None:
        self.values.pop(pc.metadata.name, None)
        self._notify()
