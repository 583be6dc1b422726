"""The metric names troupe exports, as the dashboard and alert tests see them.

``tests/manifests/test_metrics.py`` checks every series named in
``manifests/dashboards/troupe.json`` and
``manifests/components/prometheus/prometheusrule.yaml`` against
this list. It names the kube-scheduler series troupe exports under upstream's names;
a histogram appears as its ``_bucket`` series (what ``histogram_quantile`` reads) or,
when only its sum and count are queried, under its family name in
``HISTOGRAM_FAMILIES``. A test that scrapes ``/metrics`` after a real run can replace
``EXPORTED_METRICS`` with the scraped sample names.
"""

from __future__ import annotations

EXPORTED_METRICS: list[str] = [
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds_bucket",
    "scheduler_scheduling_algorithm_duration_seconds_bucket",
    "scheduler_pending_pods",
    "scheduler_queue_incoming_pods_total",
    "scheduler_framework_extension_point_duration_seconds_bucket",
    "scheduler_pod_scheduling_sli_duration_seconds_bucket",
    "scheduler_podgroup_schedule_attempts_total",
    "scheduler_podgroup_scheduling_attempt_duration_seconds_bucket",
    "scheduler_queued_entities",
    "troupe_podgroup_oldest_pending_seconds",
    "troupe_partial_gangs",
    "leader_election_master_status",
    "scheduler_preemption_victims",
    "rest_client_requests_total",
    "rest_client_request_duration_seconds_bucket",
    "process_resident_memory_bytes",
    "process_cpu_seconds_total",
]

# Upstream declares scheduler_preemption_victims a Histogram; Prometheus stores it as
# _bucket, _sum and _count series.
HISTOGRAM_FAMILIES: frozenset[str] = frozenset({"scheduler_preemption_victims"})

# Series the manifests may use that troupe does not export, and who writes them.
EXTERNAL_METRICS: dict[str, str] = {
    "up": "Prometheus, for every scrape target",
}

# Exported only by a scheduler that runs leader election (``troupe run`` with
# ``leaderElect``), as client-go does; tests/manifests/test_alerts_e2e.py scrapes one.
LEADER_ELECTION_ONLY: frozenset[str] = frozenset({"leader_election_master_status"})


def queryable_names() -> frozenset[str]:
    """Every series name a query may use for the exported metrics."""
    names = set(EXPORTED_METRICS)
    families = {n.removesuffix("_bucket") for n in EXPORTED_METRICS if n.endswith("_bucket")}
    for family in families | (HISTOGRAM_FAMILIES & names):
        names |= {f"{family}_bucket", f"{family}_sum", f"{family}_count"}
    return frozenset(names)
