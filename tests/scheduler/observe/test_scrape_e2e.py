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
from troupe.api.gangs import POD_GROUP_LABEL
from troupe.kube.health import HealthServer
from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod
from tests.kube.health_clients import Frozen

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
            type="podgroup",
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
    # One algorithm run per pod cycle: every pod attempt but the gang's members,
    # which the pod-group cycle placed.
    algorithm = "scheduler_scheduling_algorithm_duration_seconds"
    assert get(samples, f"{algorithm}_count") == total(samples, attempts) - 3 == 7
    assert get(samples, f"{algorithm}_bucket", le="+Inf") == 7
    assert 0 < get(samples, f"{algorithm}_sum") < 7
    # Seven single pods entered the active queue on PodAdd, and the gang once
    # (whatever event released it); the huge pods went to unschedulable.
    incoming = "scheduler_queue_incoming_pods_total"
    assert get(samples, incoming, queue="active", event="PodAdd") == 7
    assert total(samples, incoming, queue="active") == 8
    assert get(samples, incoming, queue="unschedulable", event="ScheduleAttemptFailure") == 2
    # Every (queue, type) series is there; only the two huge pods wait.
    entities = {
        (q, t): get(samples, "scheduler_queued_entities", queue=q, type=t)
        for q in ("active", "backoff", "unschedulable", "gated")
        for t in ("pod", "podgroup")
    }
    assert entities == {**dict.fromkeys(entities, 0.0), ("unschedulable", "pod"): 2.0}
    assert len([n for n, _ in samples if n == "scheduler_queued_entities"]) == 8
    # The default profile's pod-group cycle never waits at Permit.
    assert total(samples, "scheduler_permit_wait_duration_seconds_count") == 0
    assert not any(n.startswith("scheduler_e2e_scheduling_duration") for n, _ in samples)

    assert await status_of(served, "/healthz") == (200, "ok")
    assert await status_of(served, "/livez") == (200, "ok")
    assert await status_of(served, "/readyz") == (200, "ok")


COSCHEDULING_PROFILE = {
    "schedulerName": "cosched",
    "plugins": {
        "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
        "queueSort": {"disabled": [{"name": "PrioritySort"}]},
    },
    "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 1}}],
}


def coscheduled(name: str, group: str, cpu: str) -> dict[str, Any]:
    return pod(name, cpu=cpu, scheduler="cosched", metadata={"labels": {POD_GROUP_LABEL: group}})


async def test_permit_waits_of_the_coscheduling_profile_are_scraped(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    daemon = await start_daemon(profiles=[COSCHEDULING_PROFILE])
    server = HealthServer(
        "127.0.0.1", 0, daemon.metrics_registry, live=lambda: True, ready=lambda: True
    )
    base = f"http://127.0.0.1:{await server.start()}"
    bindings = Bindings(cluster)
    # "whole": 2 of minMember 2; the first waits at Permit for the second.
    # "short": 3 of minMember 3, one too big for any node; the other two wait and
    # are rejected (PostFilter or the 1 s permit timeout).
    for group, min_member in (("whole", 2), ("short", 3)):
        cluster.store.create(
            "podgroups.scheduling.x-k8s.io",
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": group, "namespace": "default"},
                "spec": {"minMember": min_member},
            },
        )
    for i in range(2):
        cluster.store.create("pods", coscheduled(f"whole-{i}", "whole", "100m"))
    for i in range(3):
        cluster.store.create("pods", coscheduled(f"short-{i}", "short", "64" if i == 2 else "100m"))
    permit = "scheduler_permit_wait_duration_seconds_count"
    try:
        await eventually(lambda: len(bindings.node) == 2, timeout=30, what="the whole gang bound")
        for _ in range(100):
            samples = await scrape(base)
            if get(samples, permit, result="Unschedulable") >= 2:
                break
            await asyncio.sleep(0.05)
    finally:
        await server.stop()
    assert sorted(bindings.node) == ["default/whole-0", "default/whole-1"]
    assert get(samples, permit, result="Success") == 1
    assert get(samples, permit, result="Unschedulable") >= 2
    assert get(samples, "scheduler_permit_wait_duration_seconds_sum", result="Success") > 0


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


async def test_scrapers_in_a_loop_get_cached_renders_while_the_scheduler_binds(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    """Sixteen clients scrape as fast as they can while 60 pods are scheduled and
    bound: with the clock frozen, the registry is rendered once, and every scrape is
    answered from that copy."""
    clock = Frozen()
    server = HealthServer(
        "127.0.0.1",
        0,
        daemon.metrics_registry,
        live=lambda: daemon.healthy,
        ready=lambda: daemon.ready,
        clock=clock,
    )
    base = f"http://127.0.0.1:{await server.start()}"
    bindings = Bindings(cluster)
    done = asyncio.Event()
    scrapes = 0

    async def scrape_until_done(session: aiohttp.ClientSession) -> None:
        nonlocal scrapes
        while not done.is_set():
            async with session.get(base + "/metrics") as resp:
                assert resp.status == 200
                await resp.read()
            scrapes += 1

    try:
        async with aiohttp.ClientSession() as session:
            scrapers = [asyncio.ensure_future(scrape_until_done(session)) for _ in range(16)]
            for i in range(60):
                cluster.store.create("pods", pod(f"p-{i}", cpu="100m"))
            await eventually(lambda: len(bindings.node) == 60, timeout=60, what="60 pods bound")
            done.set()
            await asyncio.gather(*scrapers)
        assert scrapes >= 16
        assert server.metrics.renders == 1
        # Once the interval has passed, a scrape sees the bindings.
        clock.now += server.limits.metrics_max_age
        samples = await scrape(base)
        assert server.metrics.renders == 2
        attempts = "scheduler_schedule_attempts_total"
        assert get(samples, attempts, result="scheduled", profile=PROFILE) == 60
    finally:
        await server.stop()
