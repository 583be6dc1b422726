"""End to end through the embedded API server: the binding slots follow the server's
latency and the client's qps. With every binding held 200 ms by the server and a qps
of 200, four slots would carry 20 bindings a second; the scheduler raises them to what
the qps needs (200 x 0.2 s x 1.5 = 60, or more for the slower ones), and leaves them at
four when the server answers at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from troupe.scheduler.loop.binding_limit import MARGIN
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod

FLOOR = 4
QPS = 200
PODS = 150


def config() -> dict[str, Any]:
    return {
        "bindingConcurrency": FLOOR,
        "clientConnection": {"qps": QPS, "burst": QPS},
    }


def gauge(daemon: Any) -> float | None:
    return daemon.metrics_registry.get_sample_value("troupe_binding_concurrency")


async def test_slots_grow_to_what_the_qps_needs_at_the_servers_latency(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    delay = 0.2
    cluster.server.faults.delay("POST", r"/binding$", delay, times=-1)
    daemon = await start_daemon(**config())
    scheduler = daemon.scheduler
    assert scheduler.bindings.limit == FLOOR
    bindings = Bindings(cluster)
    for i in range(PODS):
        cluster.store.create("pods", pod(f"p-{i}", cpu="10m"))
    await eventually(lambda: len(bindings.node) == PODS, timeout=120, what="every pod bound")
    assert scheduler.bindings.limit >= QPS * delay * MARGIN
    assert scheduler.bindings.refill == scheduler.bindings.limit // 4
    assert gauge(daemon) == scheduler.bindings.limit


async def test_slots_stay_at_the_floor_when_the_server_answers_at_once(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    daemon = await start_daemon(**config())
    scheduler = daemon.scheduler
    bindings = Bindings(cluster)
    for i in range(PODS):
        cluster.store.create("pods", pod(f"p-{i}", cpu="10m"))
    await eventually(lambda: len(bindings.node) == PODS, timeout=60, what="every pod bound")
    # Let housekeeping weigh the latencies of the last bindings too.
    assert daemon.wired is not None
    taken = daemon.wired.binding_limit
    assert taken is not None
    taken.adjust()
    assert scheduler.bindings.limit == FLOOR
    assert gauge(daemon) == FLOOR
