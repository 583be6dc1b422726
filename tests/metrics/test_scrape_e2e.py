"""End to end: the embedded cluster, a SchedulerDaemon over HTTP and its HealthServer;
``/metrics`` is scraped over HTTP after a run and the values are checked against what
the cluster saw; the probes answer as the daemon's state says."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from troupe.scheduler.daemon import SchedulerDaemon
from troupe.scheduler.health import HealthServer
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod

PROFILE = "troupe-scheduler"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(base: str) -> Samples:
    async with aiohttp.ClientSession() as session, session.get(base + "/metrics") as resp:
        assert resp.status == 200
        text = await resp.text()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over every series of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


async def status_of(base: str, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(base + path) as resp:
        return resp.status, await resp.text()


@pytest.fixture
async def served(daemon: SchedulerDaemon) -> AsyncIterator[str]:
    server = HealthServer(
        "127.0.0.1",
        0,
        daemon.metrics_registry,
        live=lambda: daemon.healthy,
        ready=lambda: daemon.ready,
    )
    port = await server.start()
    yield f"http://127.0.0.1:{port}"
    await server.stop()


def native_group(name: str, min_count: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


async def test_a_scrape_after_a_run_reports_what_happened(
    cluster: SimCluster, daemon: SchedulerDaemon, served: str
) -> None:
    bindings = Bindings(cluster)
    # 3 nodes x 4 cpu: five 1-cpu pods, a gang of 3 x 1 cpu, two pods no node can hold.
    for i in range(5):
        cluster.store.create("pods", pod(f"small-{i}", cpu="1"))
    for i in range(2):
        cluster.store.create("pods", pod(f"huge-{i}", cpu="64"))
    cluster.store.create("podgroups.scheduling.k8s.io", native_group("gang", 3))
    for i in range(3):
        cluster.store.create(
            "pods", pod(f"gang-{i}", cpu="1", schedulingGroup={"podGroupName": "gang"})
        )
    await eventually(lambda: len(bindings.node) == 8, timeout=30, what="8 pods bound")

    # The two huge pods settle in the unschedulable pool after their first attempt.
    for _ in range(200):
        if get(await scrape(served), "scheduler_pending_pods", queue="unschedulable") == 2:
            break
        await asyncio.sleep(0.05)
    samples = await scrape(served)
    attempts = "scheduler_schedule_attempts_total"
    assert get(samples, attempts, result="scheduled", profile=PROFILE) == len(bindings.node)
    assert get(samples, attempts, result="unschedulable", profile=PROFILE) >= 2
    assert get(samples, "scheduler_pending_pods", queue="unschedulable") == 2
    assert get(samples, "scheduler_pending_pods", queue="active") == 0
    assert (
        get(
            samples,
            "scheduler_podgroup_schedule_attempts_total",
            result="scheduled",
            profile=PROFILE,
        )
        == 1
    )
    assert get(samples, "scheduler_pod_scheduling_attempts_count") == 8
    assert total(samples, "scheduler_pod_scheduling_sli_duration_seconds_count") == 8
    assert total(samples, "scheduler_unschedulable_pods", plugin="NodeResourcesFit") == 2
    assert get(samples, "scheduler_cache_size", type="nodes") == 3
    assert get(samples, "scheduler_cache_size", type="pods") == 8
    assert total(samples, "rest_client_requests_total", code="201", method="POST") >= 8
    assert total(samples, "rest_client_request_duration_seconds_count", verb="GET") >= 1
    assert get(samples, "process_resident_memory_bytes") > 0
    assert not any(n.startswith("scheduler_e2e_scheduling_duration") for n, _ in samples)

    assert await status_of(served, "/healthz") == (200, "ok")
    assert await status_of(served, "/livez") == (200, "ok")
    assert await status_of(served, "/readyz") == (200, "ok")


@pytest.mark.parametrize(
    ("live", "ready", "path", "code"),
    [
        pytest.param(True, False, "/readyz", 500, id="not ready answers 500 on readyz"),
        pytest.param(True, False, "/livez", 200, id="live but not ready answers 200 on livez"),
        pytest.param(False, True, "/healthz", 500, id="a dead loop answers 500 on healthz"),
        pytest.param(False, True, "/livez", 500, id="a dead loop answers 500 on livez"),
    ],
)
async def test_probes_follow_the_callbacks(live: bool, ready: bool, path: str, code: int) -> None:
    live_fn: Callable[[], bool] = lambda: live  # noqa: E731
    server = HealthServer("127.0.0.1", 0, CollectorRegistry(), live=live_fn, ready=lambda: ready)
    port = await server.start()
    try:
        status, body = await status_of(f"http://127.0.0.1:{port}", path)
    finally:
        await server.stop()
    assert status == code
    assert (body == "ok") == (code == 200)
