"""SchedulerMetrics: each recording call lands in the right metric, labels and buckets;
the scrape-time gauges read the queue and cache; the framework records plugins only on
sampled cycles."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from troupe.api.cycle import CycleState
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.queue.entity import QueuedEntity, QueuedPodInfo
from troupe.scheduler.framework.runtime import RECORD_PLUGIN_METRICS
from troupe.scheduler.observe.metrics import (
    ATTEMPT_BUCKETS,
    EXTENSION_POINT_BUCKETS,
    SLI_BUCKETS,
    SchedulerMetrics,
    attempts_label,
)
from troupe.scheduler.observe.stats import AttemptStats


def fresh() -> tuple[SchedulerMetrics, CollectorRegistry]:
    registry = CollectorRegistry()
    return SchedulerMetrics(registry), registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_bucket_layouts_match_upstream() -> None:
    assert len(ATTEMPT_BUCKETS) == 15 and ATTEMPT_BUCKETS[0] == 0.001
    assert ATTEMPT_BUCKETS[-1] == pytest.approx(0.001 * 2**14)
    assert len(EXTENSION_POINT_BUCKETS) == 12 and EXTENSION_POINT_BUCKETS[0] == 0.0001
    assert len(SLI_BUCKETS) == 20 and SLI_BUCKETS[-1] == pytest.approx(0.01 * 2**19)


@pytest.mark.parametrize(
    ("result", "seconds", "bucket"),
    [
        pytest.param(
            "scheduled", 0.0015, "0.002", id="a 1.5 ms scheduled attempt lands in le=0.002"
        ),
        pytest.param("unschedulable", 0.0005, "0.001", id="a 0.5 ms rejection lands in le=0.001"),
        pytest.param("error", 20.0, "+Inf", id="a 20 s error lands only in +Inf"),
    ],
)
def test_an_attempt_counts_and_times_by_result_and_profile(
    result: str, seconds: float, bucket: str
) -> None:
    m, r = fresh()
    m.attempt(result, "p", seconds)
    m.attempt(result, "p", seconds)
    assert value(r, "scheduler_schedule_attempts_total", result=result, profile="p") == 2
    hist = "scheduler_scheduling_attempt_duration_seconds"
    assert value(r, hist + "_bucket", result=result, profile="p", le=bucket) == 2
    assert value(r, hist + "_sum", result=result, profile="p") == pytest.approx(2 * seconds)
    assert value(r, "scheduler_schedule_attempts_total", result=result, profile="other") is None


def test_group_attempts_have_their_own_metrics() -> None:
    m, r = fresh()
    m.group_attempt("scheduled", "p", 0.004)
    m.group_attempt("unschedulable", "p", 0.002)
    m.group_attempt("scheduled", "p", 0.003, "compositepodgroup")
    attempts = "scheduler_podgroup_schedule_attempts_total"
    for entity_type in ("podgroup", "compositepodgroup"):
        assert value(r, attempts, result="scheduled", profile="p", type=entity_type) == 1
    assert (
        value(
            r,
            "scheduler_podgroup_scheduling_attempt_duration_seconds_count",
            result="unschedulable",
            profile="p",
            type="podgroup",
        )
        == 1
    )
    assert value(r, "scheduler_schedule_attempts_total", result="scheduled", profile="p") is None


@pytest.mark.parametrize(
    ("plugin", "code", "metric", "labels"),
    [
        pytest.param(
            "",
            "UNSCHEDULABLE",
            "scheduler_framework_extension_point_duration_seconds_count",
            {"extension_point": "Filter", "status": "Unschedulable", "profile": "p"},
            id="an extension point is labelled with upstream's status string and the profile",
        ),
        pytest.param(
            "NodeResourcesFit",
            "SUCCESS",
            "scheduler_plugin_execution_duration_seconds_count",
            {"plugin": "NodeResourcesFit", "extension_point": "Filter", "status": "Success"},
            id="a plugin timing goes to the plugin histogram without a profile",
        ),
    ],
)
def test_the_framework_observer_routes_points_and_plugins(
    plugin: str, code: str, metric: str, labels: dict[str, str]
) -> None:
    m, r = fresh()
    m.observer("p")("Filter", plugin, code, 0.0002)
    assert value(r, metric, **labels) == 1


@pytest.mark.parametrize(
    ("attempts", "label"),
    [
        pytest.param(1, "1", id="one attempt is labelled 1"),
        pytest.param(14, "14", id="fourteen attempts are labelled 14"),
        pytest.param(15, "15+", id="fifteen attempts share the 15+ label"),
        pytest.param(40, "15+", id="forty attempts share the 15+ label"),
    ],
)
def test_sli_attempts_label(attempts: int, label: str) -> None:
    assert attempts_label(attempts) == label


def test_a_bound_pod_records_the_sli_and_its_attempts() -> None:
    m, r = fresh()
    stats = AttemptStats()
    stats.bound_hooks.append(m.pod_bound)
    stats.bound(3, 10.0, 12.5)
    stats.bound(1, None, 12.5)  # never reached the active queue: no SLI sample
    sli = "scheduler_pod_scheduling_sli_duration_seconds"
    assert value(r, sli + "_sum", attempts="3") == pytest.approx(2.5)
    assert value(r, sli + "_bucket", attempts="3", le="2.56") == 1
    assert value(r, sli + "_bucket", attempts="3", le="1.28") == 0
    assert value(r, "scheduler_pod_scheduling_attempts_bucket", le="4.0") == 1
    assert value(r, "scheduler_pod_scheduling_attempts_bucket", le="2.0") == 0
    assert value(r, "scheduler_pod_scheduling_attempts_count") == 1


def test_permit_wait_incoming_algorithm_and_rest_client() -> None:
    m, r = fresh()
    m.permit_wait("SUCCESS", 0.5)
    m.incoming("active", "PodAdd")
    m.incoming("active", "PodAdd")
    m.algorithm(0.003)
    m.rest_request("POST", "127.0.0.1:6443", "201", 0.01)
    m.rest_request("GET", "127.0.0.1:6443", "<error>", 5.0)
    assert value(r, "scheduler_permit_wait_duration_seconds_count", result="Success") == 1
    assert value(r, "scheduler_queue_incoming_pods_total", queue="active", event="PodAdd") == 2
    assert value(r, "scheduler_scheduling_algorithm_duration_seconds_bucket", le="0.004") == 1
    assert (
        value(r, "rest_client_requests_total", code="201", method="POST", host="127.0.0.1:6443")
        == 1
    )
    assert (
        value(r, "rest_client_request_duration_seconds_count", verb="GET", host="127.0.0.1:6443")
        == 1
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["scheduled", "unschedulable", "error"]), max_size=30))
def test_attempt_counts_always_sum_to_the_calls(results: list[str]) -> None:
    m, r = fresh()
    for result in results:
        m.attempt(result, "p", 0.001)
    total = sum(
        value(r, "scheduler_schedule_attempts_total", result=res, profile="p") or 0
        for res in ("scheduled", "unschedulable", "error")
    )
    assert total == len(results)


# --- scrape-time gauges ---------------------------------------------------------------


def queued_pod(name: str, rejected_by: set[str]) -> QueuedPodInfo:
    pod = Pod.model_validate(
        {
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"schedulerName": "p", "containers": []},
        }
    )
    return QueuedPodInfo(
        key=f"default/{name}",
        priority=0,
        timestamp=0.0,
        pod_info=PodInfo.of(pod),
        unschedulable_plugins=rejected_by,
    )


@dataclass
class FakeQueue:
    pools: dict[str, list[QueuedEntity]] = field(default_factory=dict)

    def pending_counts(self) -> dict[str, int]:
        return {
            q: len(self.pools.get(q, [])) for q in ("active", "backoff", "unschedulable", "gated")
        }

    def entity_counts(self) -> dict[tuple[str, str], int]:
        return {(q, "pod"): n for q, n in self.pending_counts().items()}

    def entities(self, queue: str) -> list[QueuedEntity]:
        return self.pools.get(queue, [])

    def in_flight(self) -> list[QueuedEntity]:
        return self.pools.get("in_flight", [])

    def group_first_seen(self, key: str) -> float | None:
        return None


@dataclass
class FakeCache:
    node_count: int = 3
    pod_count: int = 7
    assumed_count: int = 2


def test_state_gauges_are_read_at_scrape_time() -> None:
    m, r = fresh()
    queue = FakeQueue()
    m.watch_state(queue, FakeCache())  # type: ignore[arg-type]
    assert value(r, "scheduler_pending_pods", queue="unschedulable") == 0
    queue.pools["unschedulable"] = [
        queued_pod("a", {"NodeResourcesFit"}),
        queued_pod("b", {"NodeResourcesFit", "TaintToleration"}),
    ]
    queue.pools["backoff"] = [queued_pod("c", set())]
    assert value(r, "scheduler_pending_pods", queue="unschedulable") == 2
    assert value(r, "scheduler_queued_entities", queue="backoff", type="pod") == 1
    assert value(r, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile="p") == 2
    assert value(r, "scheduler_unschedulable_pods", plugin="TaintToleration", profile="p") == 1
    assert value(r, "scheduler_cache_size", type="nodes") == 3
    assert value(r, "scheduler_cache_size", type="pods") == 7
    assert value(r, "scheduler_cache_size", type="assumed_pods") == 2


def test_two_schedulers_in_one_process_do_not_share_metrics() -> None:
    a, ra = fresh()
    b, rb = fresh()
    a.attempt("scheduled", "p", 0.001)
    assert value(ra, "scheduler_schedule_attempts_total", result="scheduled", profile="p") == 1
    assert value(rb, "scheduler_schedule_attempts_total", result="scheduled", profile="p") is None
    assert b.registry is rb


def test_the_removed_e2e_histogram_is_never_exported() -> None:
    m, r = fresh()
    m.watch_state(FakeQueue(), FakeCache())  # type: ignore[arg-type]
    names = {metric.name for metric in r.collect()}
    assert "scheduler_e2e_scheduling_duration_seconds" not in names
    assert "scheduler_pending_pods" in names


def test_sampling_flag_is_a_cycle_state_key() -> None:
    state = CycleState()
    assert state.get(RECORD_PLUGIN_METRICS) is None
    state.write(RECORD_PLUGIN_METRICS, True)
    assert state.clone().get(RECORD_PLUGIN_METRICS) is True
