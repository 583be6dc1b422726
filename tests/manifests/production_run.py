"""One run of troupe as ``troupe run`` runs it, against the embedded API server, with
every request the server saw recorded and ``/metrics`` scraped at each phase.

``troupe.cli.run.serve_elected`` (leader election on, the ConfigMap's profile from
``manifests/scheduler-config.yaml``) schedules plain pods, an unschedulable pod retried after a
bound pod is deleted (so its FailedScheduling event becomes a series), a scheduler-plugins
PodGroup, a 1.36 PodGroup, a 1.35 Workload and a gang that never fits. Then bindings
are refused with 403 (an RBAC mistake), and finally another holder takes the Lease,
so the run ends the way a replica that lost leadership does (exit status 1).

The recording hook wraps the server's request handler before it starts listening
(test-only; ``troupe.sim`` is unchanged). Objects are created in-process through the
store, so every HTTP request the server saw is one troupe sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from troupe.api.config import load_config
from troupe.api.gangs import POD_GROUP_LABEL
from troupe.cli.run import Options, Probes, serve_elected
from troupe.kube.health import HealthServer
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec

from tests.integration.conftest import Bindings, eventually, pod
from tests.manifests.manifest_files import one, scheduler_config_text
from tests.scheduler.observe.test_scrape_e2e import Samples, scrape

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]


@dataclass
class ProductionRun:
    requests: list[Request] = field(default_factory=list)
    scrapes: dict[str, Samples] = field(default_factory=dict)
    # Test-clock time (time.monotonic()) each scrape was sent, and answered.
    scrape_sent_at: dict[str, float] = field(default_factory=dict)
    scraped_at: dict[str, float] = field(default_factory=dict)
    exit_status: int | None = None
    lease: dict[str, Any] = field(default_factory=dict)


def _record_requests(cluster: SimCluster, run: ProductionRun) -> None:
    server = cluster.server
    inner: Handler = server._handle

    async def handle(request: web.Request) -> web.StreamResponse:
        run.requests.append(Request(request.method, request.path, dict(request.query)))
        return await inner(request)

    server._handle = handle  # type: ignore[method-assign]


def _group(api_version: str, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def _create_workloads(cluster: SimCluster) -> None:
    store = cluster.store
    for i in range(3):
        store.create("pods", pod(f"plain-{i}", cpu="500m"))
    # No node holds 64 CPUs: Unschedulable, a pods/status patch and an event.
    store.create("pods", pod("huge", cpu="64"))
    store.create(
        "podgroups.scheduling.x-k8s.io",
        _group("scheduling.x-k8s.io/v1alpha1", "PodGroup", "sp", {"minMember": 2}),
    )
    for i in range(2):
        store.create(
            "pods", pod(f"sp-{i}", cpu="500m", metadata={"labels": {POD_GROUP_LABEL: "sp"}})
        )
    store.create(
        "podgroups.scheduling.k8s.io",
        _group(
            "scheduling.k8s.io/v1alpha2",
            "PodGroup",
            "native",
            {"schedulingPolicy": {"gang": {"minCount": 2}}},
        ),
    )
    for i in range(2):
        store.create(
            "pods", pod(f"native-{i}", cpu="500m", schedulingGroup={"podGroupName": "native"})
        )
    store.create(
        "workloads.v1alpha1.scheduling.k8s.io",
        _group(
            "scheduling.k8s.io/v1alpha1",
            "Workload",
            "wl",
            {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]},
        ),
    )
    for i in range(2):
        store.create(
            "pods",
            pod(f"wl-{i}", cpu="500m", workloadRef={"name": "wl", "podGroup": "workers"}),
        )
    # A gang that never fits: 3 members of 5 CPUs on 4-CPU nodes.
    store.create(
        "podgroups.scheduling.x-k8s.io",
        _group("scheduling.x-k8s.io/v1alpha1", "PodGroup", "stuck", {"minMember": 3}),
    )
    for i in range(3):
        store.create(
            "pods", pod(f"stuck-{i}", cpu="5", metadata={"labels": {POD_GROUP_LABEL: "stuck"}})
        )


def _failed_scheduling_count(cluster: SimCluster, pod_name: str) -> int:
    events = cluster.store.list("events.events.k8s.io", namespace="default")
    counts = [
        int((e.get("series") or {}).get("count") or 1)
        for e in events
        if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == pod_name
    ]
    return max(counts, default=0)


def _lease(cluster: SimCluster, namespace: str, name: str) -> dict[str, Any]:
    found = cluster.store.list("leases.coordination.k8s.io", namespace=namespace)
    return next((obj for obj in found if obj["metadata"]["name"] == name), {})


async def production_run(tmp_path: Path) -> ProductionRun:
    run = ProductionRun()
    cluster = SimCluster(
        [NodeSpec(count=3, cpu="4", memory="16Gi", zones=("zone-a", "zone-b"))],
        bookmark_interval=0.5,
    )
    _record_requests(cluster, run)
    await cluster.start()
    # As `kubectl apply -k manifests/` would: the Lease lives in troupe's namespace.
    cluster.store.create("namespaces", one("Namespace"))
    try:
        await _play(cluster, run, tmp_path)
    finally:
        await cluster.stop()
    return run


async def _play(cluster: SimCluster, run: ProductionRun, tmp_path: Path) -> None:
    config = load_config(scheduler_config_text(), catalog(default_registry()))
    le = config.leader_election
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    connection = Connection(kubeconfig=str(kubeconfig))
    daemon = SchedulerDaemon(config, connection, sync_timeout=10)
    probes = Probes(daemon)
    health = HealthServer(
        "127.0.0.1", 0, daemon.metrics_registry, live=probes.live, ready=probes.ready
    )
    base = f"http://127.0.0.1:{await health.start()}"
    stop = asyncio.Event()
    options = Options(grace=1.0, leader_elect=True, bind_address="127.0.0.1", port=0)
    task = asyncio.ensure_future(serve_elected(config, connection, options, probes, stop))

    async def snapshot(phase: str) -> None:
        # /metrics is rendered at most once per metrics_max_age (as Prometheus, which
        # scrapes every 15 s or more, never notices): wait that long between scrapes.
        previous = max(run.scraped_at.values(), default=float("-inf"))
        wait = previous + health.limits.metrics_max_age - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        run.scrape_sent_at[phase] = time.monotonic()
        run.scrapes[phase] = await scrape(base)
        run.scraped_at[phase] = time.monotonic()

    try:
        await eventually(lambda: daemon.ready, timeout=30, what="the leader's caches")
        bindings = Bindings(cluster)
        _create_workloads(cluster)
        await eventually(lambda: len(bindings.node) == 9, timeout=30, what="9 pods bound")
        await eventually(
            lambda: _failed_scheduling_count(cluster, "huge") >= 1, timeout=10, what="event"
        )
        await asyncio.sleep(1.0)  # the stuck gang ages
        await snapshot("leading")

        # A bound pod goes away, freeing room: the unschedulable entities are retried
        # (and still do not fit); the huge pod's event repeats as a series.
        cluster.store.delete("pods", "plain-0", "default", grace_period_seconds=0)
        await eventually(
            lambda: _failed_scheduling_count(cluster, "huge") >= 2, timeout=15, what="a series"
        )
        await snapshot("after a retry")

        # RBAC without pods/binding: the API server refuses the binding.
        cluster.server.faults.fail("POST", r"/binding$", 403, times=1000)
        cluster.store.create("pods", pod("forbidden", cpu="100m"))
        await eventually(
            lambda: any(r.path.endswith("/forbidden/binding") for r in run.requests),
            timeout=10,
            what="the refused binding",
        )
        await asyncio.sleep(0.5)
        await snapshot("bindings forbidden")
        cluster.server.faults.reset()

        # Another holder takes the Lease: the leader stops and serve_elected returns 1.
        lease = cluster.store.get(
            "leases.coordination.k8s.io", le.resource_name, le.resource_namespace
        )
        lease["spec"].update(holderIdentity="other_1", leaseDurationSeconds=60)
        cluster.store.update("leases.coordination.k8s.io", lease)
        run.exit_status = await asyncio.wait_for(task, 30)
        await snapshot("lease lost")
        run.lease = _lease(cluster, le.resource_namespace, le.resource_name)
    finally:
        if not task.done():
            stop.set()
            await asyncio.wait_for(task, 30)
        await health.stop()
