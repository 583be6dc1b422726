"""Every Prometheus metric troupe exports, with kube-scheduler's names, labels and buckets.

``SchedulerMetrics`` defines them on a ``CollectorRegistry`` it is given (the daemon
makes a fresh one per scheduler, so several schedulers can run in one process) and
offers the recording calls the scheduler makes:

- ``attempt`` / ``group_attempt`` are ``AttemptStats`` hooks (``troupe.scheduler.observe.stats``);
- ``observer(profile)`` is the framework ``Observer`` (extension points, and plugins
  on sampled cycles);
- ``algorithm``, ``permit_wait``, ``pod_bound``, ``queue_incoming`` and
  ``rest_request`` are called by ``schedule_one``, the queue and the HTTP transport.

Every counter and histogram here is recorded per pod, per cycle or per request, so
they are ``troupe.scheduler.observe.fastmetrics`` families (lock-free, single-threaded; the
exposition is prometheus_client's to the byte), and the recording calls keep their
children in dicts keyed by their raw arguments, so a recording is a dict lookup and
one ``inc`` or ``observe``. Gauges that describe state (pending pods, unschedulable
pods by plugin, cache size, queued entities, the age of the oldest pending pod group)
are defined here too, and read from the queue and the cache at scrape time by the
collector of ``troupe.scheduler.observe.scrape_state``, so the hot path pays nothing
for them. ``leading`` is the leader elector's hook
(``leader_election_master_status``, client-go's name).

``troupe.kube.health`` serves the registry on ``/metrics``; docs/metrics.md
lists every metric.
"""

from __future__ import annotations

from typing import Protocol

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Gauge,
)
from prometheus_client.metrics_core import GaugeMetricFamily

from troupe.api.clock import Clock, RealClock
from troupe.scheduler.observe.fastmetrics import (
    CounterChild,
    CounterFamily,
    HistogramChild,
    HistogramFamily,
)
from troupe.scheduler.observe.scrape_state import (
    CacheView,
    QueueView,
    StateCollector,
    StateFamilies,
)

PLUGIN_METRICS_SAMPLE_PERCENT = 10
"""Upstream records per-plugin durations on 10% of scheduling cycles
(``pluginMetricsSamplePercent`` in schedule_one.go)."""


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """``start * factor**k`` for k in [0, count) (component-base ``ExponentialBuckets``)."""
    return tuple(start * factor**k for k in range(count))


# Buckets as upstream pkg/scheduler/metrics/metrics.go.
ATTEMPT_BUCKETS = exponential_buckets(0.001, 2, 15)
EXTENSION_POINT_BUCKETS = exponential_buckets(0.0001, 2, 12)
PLUGIN_BUCKETS = exponential_buckets(0.00001, 1.5, 20)
SLI_BUCKETS = exponential_buckets(0.01, 2, 20)
POD_ATTEMPTS_BUCKETS = exponential_buckets(1, 2, 5)
PERMIT_WAIT_BUCKETS = exponential_buckets(0.001, 2, 15)
PREEMPTION_VICTIMS_BUCKETS = exponential_buckets(1, 2, 7)
# client-go rest_client_request_duration_seconds (component-base/metrics/prometheus/restclient).
REST_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)

# Upstream labels statuses with Code.String().
STATUS_LABEL = {
    "SUCCESS": "Success",
    "ERROR": "Error",
    "UNSCHEDULABLE": "Unschedulable",
    "UNSCHEDULABLE_AND_UNRESOLVABLE": "UnschedulableAndUnresolvable",
    "WAIT": "Wait",
    "SKIP": "Skip",
    "PENDING": "Pending",
}

# Upstream getAttemptsLabel: attempts beyond 15 share one label value.
MAX_ATTEMPTS_LABEL = 15


def attempts_label(attempts: int) -> str:
    return f"{MAX_ATTEMPTS_LABEL}+" if attempts >= MAX_ATTEMPTS_LABEL else str(attempts)


def _state_families() -> StateFamilies:
    """The gauges read from the queue and the cache at scrape time, built afresh
    for each scrape (``troupe.scheduler.observe.scrape_state``)."""
    return StateFamilies(
        pending=GaugeMetricFamily(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods "
            "in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' "
            "means number of pods in unschedulablePods that the scheduler attempted "
            "to schedule and failed; 'gated' is the number of unschedulable pods that "
            "the scheduler never attempted to schedule because they are gated.",
            labels=["queue"],
        ),
        unschedulable=GaugeMetricFamily(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod will "
            "increment the gauge for all plugins that caused it to not schedule and so "
            "this metric have meaning only when broken down by plugin.",
            labels=["plugin", "profile"],
        ),
        cache=GaugeMetricFamily(
            "scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            labels=["type"],
        ),
        entities=GaugeMetricFamily(
            "scheduler_queued_entities",
            "Number of entities waiting in the scheduling queue, by queue and by type "
            "(a single pod, or a pod group counted once for all its pending members).",
            labels=["queue", "type"],
        ),
        oldest_group=GaugeMetricFamily(
            "troupe_podgroup_oldest_pending_seconds",
            "Seconds since the scheduling queue first held a pod of the longest-pending "
            "pod group it still holds (in any queue or being scheduled); 0 when none. "
            "Moving between queues does not reset it.",
        ),
    )


class SchedulerMetrics:
    """The metrics of one scheduler, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
        self._define_pod_metrics(r)
        self._define_group_metrics(r)
        self._define_process_metrics(r)
        # Children by the recording calls' raw arguments (before label mapping).
        self._attempts: dict[tuple[str, str], tuple[CounterChild, HistogramChild]] = {}
        self._group_attempts: dict[tuple[str, str, str], tuple[CounterChild, HistogramChild]] = {}
        self._requests: dict[tuple[str, str, str], tuple[CounterChild, HistogramChild]] = {}
        self._permit_waits: dict[str, HistogramChild] = {}
        self._partial_labels: set[tuple[str, str]] = set()
        self._slis: dict[int, HistogramChild] = {}
        self._algorithm = self.algorithm_duration.labels()
        self._pod_attempts = self.pod_attempts.labels()
        self._preemption_attempts = self.preemption_attempts.labels()
        self._preemption_victims = self.preemption_victims_count.labels()
        self._workload_preemption_victims = self.workload_preemption_victims_count.labels()
        self._workload_preemption_duration = self.workload_preemption_duration.labels()
        self._workload_preemption_reprieved = self.workload_preemption_reprieved.labels()

    def _define_pod_metrics(self, r: CollectorRegistry) -> None:
        """kube-scheduler's pod attempt, queue, extension point and SLI families."""
        self.schedule_attempts = CounterFamily(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a "
            "pod could not be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=r,
        )
        self.attempt_duration = HistogramFamily(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.algorithm_duration = HistogramFamily(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds",
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.queue_incoming = CounterFamily(
            "scheduler_queue_incoming_pods_total",
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=r,
        )
        self.extension_point_duration = HistogramFamily(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=EXTENSION_POINT_BUCKETS,
            registry=r,
        )
        self.plugin_duration = HistogramFamily(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=PLUGIN_BUCKETS,
            registry=r,
        )
        self.sli_duration = HistogramFamily(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the "
            "scheduling queue and might involve multiple scheduling attempts.",
            ["attempts"],
            buckets=SLI_BUCKETS,
            registry=r,
        )
        self.pod_attempts = HistogramFamily(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=POD_ATTEMPTS_BUCKETS,
            registry=r,
        )
        self.permit_wait_duration = HistogramFamily(
            "scheduler_permit_wait_duration_seconds",
            "Duration of waiting on permit.",
            ["result"],
            buckets=PERMIT_WAIT_BUCKETS,
            registry=r,
        )

    def _define_group_metrics(self, r: CollectorRegistry) -> None:
        """Pod-group attempts and preemption (pods' and groups')."""
        self.group_attempts = CounterFamily(
            "scheduler_podgroup_schedule_attempts_total",
            "Number of attempts to schedule pod groups, by the result, scheduler profile "
            "and entity type ('podgroup' or 'compositepodgroup'). 'unschedulable' "
            "means the group could not be scheduled, while 'error' means an internal "
            "scheduler problem.",
            ["result", "profile", "type"],
            registry=r,
        )
        self.group_attempt_duration = HistogramFamily(
            "scheduler_podgroup_scheduling_attempt_duration_seconds",
            "Pod group scheduling attempt latency in seconds (the whole group's cycle).",
            ["result", "profile", "type"],
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.preemption_attempts = CounterFamily(
            "scheduler_preemption_attempts_total",
            "Total preemption attempts in the cluster till now",
            registry=r,
        )
        self.preemption_victims_count = HistogramFamily(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            buckets=PREEMPTION_VICTIMS_BUCKETS,
            registry=r,
        )
        self.workload_preemption_attempts = CounterFamily(
            "scheduler_podgroup_preemption_attempts_total",
            "Number of preemption attempts for pod groups (KEP-5710), by the result: "
            "'preempted' means victims were evicted, 'unschedulable' that the gang would "
            "not fit even with every candidate victim gone, 'rejected' that a "
            "PermitDisruption plugin refused the plan, 'error' that the search failed.",
            ["result"],
            registry=r,
        )
        self.workload_preemption_duration = HistogramFamily(
            "scheduler_podgroup_preemption_attempt_duration_seconds",
            "Duration of each pod group's victim search (PodGroupPostFilter) in seconds",
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.workload_preemption_victims_count = HistogramFamily(
            "scheduler_podgroup_preemption_victims",
            "Number of victims of each preemption carried out for a pod group",
            buckets=PREEMPTION_VICTIMS_BUCKETS,
            registry=r,
        )
        self.workload_preemption_reprieved = CounterFamily(
            "scheduler_podgroup_preemption_reprieved_total",
            "Candidate victim units (pods, or groups evicted as a whole) spared by the "
            "reprieve of pod group preemptions carried out",
            registry=r,
        )

    def _define_process_metrics(self, r: CollectorRegistry) -> None:
        """The client, leader election and troupe's own gang recovery families."""
        self.rest_requests = CounterFamily(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=r,
        )
        self.rest_duration = HistogramFamily(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            ["verb", "host"],
            buckets=REST_BUCKETS,
            registry=r,
        )
        self.leader_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease. "
            "Please make sure to group by name.",
            ["name"],
            registry=r,
        )
        self.partial_gangs = Gauge(
            "troupe_partial_gangs",
            "Number of gangs left with some but fewer than minCount members bound "
            "(after a crash or a failed binding), by profile and partialGangPolicy.",
            ["profile", "policy"],
            registry=r,
        )
        self.binding_concurrency = Gauge(
            "troupe_binding_concurrency",
            "Binding cycles allowed in flight at once: bindingConcurrency, raised up to "
            "maxBindingConcurrency while the API server's latency and the client's qps ask.",
            registry=r,
        )
        self.partial_gang_outcomes = CounterFamily(
            "troupe_partial_gang_outcomes_total",
            "Partly bound gangs by what became of them: 'completed' (the rest was "
            "placed), 'evicted' (the bound members were evicted past the timeout), "
            "'kept' (partialGangPolicy Keep: kept bound past the timeout).",
            ["result"],
            registry=r,
        )

    @classmethod
    def for_process(cls) -> SchedulerMetrics:
        """A fresh registry with the process, platform and GC collectors (production)."""
        registry = CollectorRegistry(auto_describe=True)
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            registry.register(collector)
        return cls(registry)

    def watch_state(self, queue: QueueView, cache: CacheView, clock: Clock | None = None) -> None:
        """Register the scrape-time gauges, read from this queue and cache. ``clock``
        is the queue's (its timestamps are on it); by default the process's
        monotonic clock, which is what ``SchedulerDaemon`` gives the queue. Called
        once, by the composition root (``troupe.scheduler.service.wiring``), when
        the queue and the cache exist."""
        self.registry.register(StateCollector(_state_families, queue, cache, clock or RealClock()))

    def leading(self, name: str, leading: bool) -> None:
        """The leader elector's hook: 1 while this replica holds lease ``name``."""
        self.leader_status.labels(name).set(1 if leading else 0)

    def partial_gangs_now(self, counts: dict[tuple[str, str], int]) -> None:
        """The partly bound gangs now, by (profile, policy); absent pairs read 0."""
        for labels in list(self._partial_labels):
            if labels not in counts:
                self.partial_gangs.labels(*labels).set(0)
        for labels, n in counts.items():
            self.partial_gangs.labels(*labels).set(n)
        self._partial_labels |= set(counts)

    def binding_limit(self, limit: int) -> None:
        """The bindings' slots now (``troupe.scheduler.loop.binding_limit``)."""
        self.binding_concurrency.set(limit)

    def partial_gang_outcome(self, result: str) -> None:
        self.partial_gang_outcomes.labels(result).inc()

    # --- recording (hot path: cached children only) ------------------------------------

    def attempt(self, result: str, profile: str, seconds: float) -> None:
        """One pod attempt (``AttemptStats`` hook)."""
        pair = self._attempts.get((result, profile))
        if pair is None:
            pair = self._attempts[(result, profile)] = (
                self.schedule_attempts.labels(result, profile),
                self.attempt_duration.labels(result, profile),
            )
        pair[0].inc()
        pair[1].observe(seconds)

    def group_attempt(
        self, result: str, profile: str, seconds: float, entity_type: str = "podgroup"
    ) -> None:
        """One pod-group cycle (``AttemptStats`` group hook)."""
        labels = (result, profile, entity_type)
        pair = self._group_attempts.get(labels)
        if pair is None:
            pair = self._group_attempts[labels] = (
                self.group_attempts.labels(*labels),
                self.group_attempt_duration.labels(*labels),
            )
        pair[0].inc()
        pair[1].observe(seconds)

    def algorithm(self, seconds: float) -> None:
        self._algorithm.observe(seconds)

    def preemption_attempt(self) -> None:
        """DefaultPreemption's PostFilter ran once."""
        self._preemption_attempts.inc()

    def preemption_victims(self, victims: int) -> None:
        """A preemption was carried out with this many victims."""
        self._preemption_victims.observe(victims)

    def workload_preemption_attempt(
        self, result: str, seconds: float = 0.0, reprieved: int = 0
    ) -> None:
        """A gang below quorum looked for victims (KEP-5710) for ``seconds``, with this
        result, sparing ``reprieved`` candidates."""
        self.workload_preemption_attempts.labels(result).inc()
        self._workload_preemption_duration.observe(seconds)
        if reprieved:
            self._workload_preemption_reprieved.inc(reprieved)

    def workload_preemption_victims(self, victims: int) -> None:
        """A gang's preemption was carried out with this many victims."""
        self._workload_preemption_victims.observe(victims)

    def observer(self, profile: str) -> ObserverFn:
        """The framework ``Observer`` of one profile: extension points always, plugins
        (plugin != "") only when the framework sampled the cycle."""
        points: dict[tuple[str, str], HistogramChild] = {}
        plugins: dict[tuple[str, str, str], HistogramChild] = {}
        point_family, plugin_family = self.extension_point_duration, self.plugin_duration

        def observe(point: str, plugin: str, code: str, seconds: float) -> None:
            if plugin:
                child = plugins.get((plugin, point, code))
                if child is None:
                    status = STATUS_LABEL.get(code, code)
                    child = plugins[(plugin, point, code)] = plugin_family.labels(
                        plugin, point, status
                    )
            else:
                child = points.get((point, code))
                if child is None:
                    status = STATUS_LABEL.get(code, code)
                    child = points[(point, code)] = point_family.labels(point, status, profile)
            child.observe(seconds)

        return observe

    def permit_wait(self, code: str, seconds: float) -> None:
        child = self._permit_waits.get(code)
        if child is None:
            child = self._permit_waits[code] = self.permit_wait_duration.labels(
                STATUS_LABEL.get(code, code)
            )
        child.observe(seconds)

    def pod_bound(self, attempts: int, seconds: float) -> None:
        """A pod was bound ``seconds`` after it first entered the active queue."""
        child = self._slis.get(attempts)
        if child is None:
            child = self._slis[attempts] = self.sli_duration.labels(attempts_label(attempts))
        child.observe(seconds)
        self._pod_attempts.observe(attempts)

    def incoming(self, queue: str, event: str) -> None:
        """``SchedulingQueue`` ``on_incoming`` hook."""
        self.queue_incoming.labels(queue, event).inc()

    def rest_request(self, method: str, host: str, code: str, seconds: float) -> None:
        """One HTTP request to the API server (``HttpTransport`` observer); ``code`` is
        the status code, or ``<error>`` when no reply came (client-go's label)."""
        pair = self._requests.get((code, method, host))
        if pair is None:
            pair = self._requests[(code, method, host)] = (
                self.rest_requests.labels(code, method, host),
                self.rest_duration.labels(method, host),
            )
        pair[0].inc()
        pair[1].observe(seconds)


class ObserverFn(Protocol):
    def __call__(self, point: str, plugin: str, code: str, seconds: float) -> None: ...
