"""The scheduler records into SchedulerMetrics as it runs (in process, FakeClock):
attempts, algorithm time, extension points every cycle, plugins on ~10% of cycles,
incoming queue events, the SLI of bound pods."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from troupe.scheduler.observe.metrics import SchedulerMetrics

from tests.plugins.builders import make_node, make_pod
from tests.scheduler.harness import Harness

PROFILE = "troupe-scheduler"


def harness_with_metrics() -> tuple[Harness, CollectorRegistry]:
    registry = CollectorRegistry()
    return Harness(metrics=SchedulerMetrics(registry)), registry


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_a_run_records_attempts_points_sampled_plugins_and_the_sli() -> None:
    h, r = harness_with_metrics()
    nodes = [make_node().name(f"n{i}").capacity(cpu="4", memory="8Gi", pods=110) for i in range(10)]
    h.nodes(n.obj() for n in nodes)
    # Each pod its own shape, so every attempt runs the full cycle (no batching).
    pods = [
        make_pod().name(f"p{i}").req(cpu="100m", memory=f"{i + 1}Mi").scheduler_name(PROFILE)
        for i in range(200)
    ]
    h.pods(p.obj() for p in pods)
    h.pods([make_pod().name("huge").req(cpu="64").scheduler_name(PROFILE).obj()])
    await h.settle(rounds=400)

    attempts = "scheduler_schedule_attempts_total"
    assert sample(r, attempts, result="scheduled", profile=PROFILE) == 200
    assert sample(r, attempts, result="unschedulable", profile=PROFILE) == 1
    assert sample(r, "scheduler_scheduling_algorithm_duration_seconds_count") == 201
    filter_point = "scheduler_framework_extension_point_duration_seconds_count"
    assert (
        sample(r, filter_point, extension_point="Filter", status="Success", profile=PROFILE) == 201
    )
    # Upstream samples plugin timings on 10% of cycles: 201 cycles give ~20.
    sampled_cycles = sample(
        r,
        "scheduler_plugin_execution_duration_seconds_count",
        plugin="NodeResourcesFit",
        extension_point="Filter",
        status="Success",
    )
    assert 5 <= sampled_cycles <= 50
    assert sample(r, "scheduler_pod_scheduling_attempts_count") == 200
    assert sample(r, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1") == 200
    assert sample(r, "scheduler_queue_incoming_pods_total", queue="active", event="PodAdd") == 201
    assert sample(r, "scheduler_pending_pods", queue="unschedulable") == 1
    assert (
        sample(r, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile=PROFILE) == 1
    )
    assert sample(r, "scheduler_cache_size", type="pods") == 200
    assert sample(r, "scheduler_cache_size", type="nodes") == 10
    await h.close()


async def test_without_metrics_no_cycle_is_sampled() -> None:
    h = Harness()
    state = h.parts.algorithm.new_cycle_state()
    from troupe.scheduler.framework.runtime import RECORD_PLUGIN_METRICS

    assert all(
        h.parts.algorithm.new_cycle_state().get(RECORD_PLUGIN_METRICS) is None for _ in range(200)
    )
    assert state.get(RECORD_PLUGIN_METRICS) is None
    await h.close()
