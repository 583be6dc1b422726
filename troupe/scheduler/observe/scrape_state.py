"""The gauges that describe state, read from the queue and the cache when Prometheus
scrapes, so the hot path pays nothing for them.

``StateCollector`` fills the families ``troupe.scheduler.observe.metrics`` defines
(pending pods, unschedulable pods by plugin, cache size, queued entities, the age of
the oldest pending pod group) from what it reads through ``QueueView`` (the
``SchedulingQueue``) and ``CacheView`` (the scheduler cache); ``SchedulerMetrics``
registers it once the queue and the cache exist (``watch_state``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple, Protocol

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from troupe.api.clock import Clock
from troupe.queue import QueueName
from troupe.queue.entity import QueuedEntity


class QueueView(Protocol):
    """What the scrape-time collector reads of ``SchedulingQueue``."""

    def pending_counts(self) -> dict[str, int]: ...

    def entity_counts(self) -> dict[tuple[str, str], int]: ...

    def entities(self, queue: QueueName) -> list[QueuedEntity]: ...

    def in_flight(self) -> list[QueuedEntity]: ...

    def group_first_seen(self, key: str) -> float | None: ...


class CacheView(Protocol):
    @property
    def node_count(self) -> int: ...

    @property
    def pod_count(self) -> int: ...

    @property
    def assumed_count(self) -> int: ...


def _profile_of(entity: QueuedEntity) -> str:
    pods = entity.pods()
    return pods[0].spec.scheduler_name if pods else ""


class StateFamilies(NamedTuple):
    """The scrape-time gauges, fresh and empty (``troupe.scheduler.observe.metrics``
    defines them)."""

    pending: GaugeMetricFamily
    unschedulable: GaugeMetricFamily
    cache: GaugeMetricFamily
    entities: GaugeMetricFamily
    oldest_group: GaugeMetricFamily


class StateCollector(Collector):
    """Gauges read from the queue and the cache when Prometheus scrapes; ``families``
    builds them empty, once per scrape."""

    def __init__(
        self,
        families: Callable[[], StateFamilies],
        queue: QueueView,
        cache: CacheView,
        clock: Clock,
    ) -> None:
        self._families = families
        self.queue = queue
        self.cache = cache
        self.clock = clock

    def describe(self) -> Iterable[Metric]:
        # Names only: the registry checks for duplicates without calling collect().
        return list(self._families())

    def collect(self) -> Iterator[Metric]:
        pending, unschedulable, cache, entities, oldest_group = self._families()
        queue = self.queue
        oldest_group.add_metric([], _oldest_group_age(queue, self.clock.now()))
        for name, n in sorted(queue.pending_counts().items()):
            pending.add_metric([name], n)
        for (name, kind), n in sorted(queue.entity_counts().items()):
            entities.add_metric([name, kind], n)
        for (plugin, profile), n in sorted(_rejections(queue).items()):
            unschedulable.add_metric([plugin, profile], n)
        cache.add_metric(["nodes"], self.cache.node_count)
        cache.add_metric(["pods"], self.cache.pod_count)
        cache.add_metric(["assumed_pods"], self.cache.assumed_count)
        yield from (pending, unschedulable, cache, entities, oldest_group)


def _oldest_group_age(queue: QueueView, now: float) -> float:
    """Age of the oldest pod group with a queued or in-flight entity. The queue's
    ``group_first_seen`` outlives every move between sub-queues, so a gang cycling
    unschedulable -> backoff -> active keeps its age (KEP-4671 group entity)."""
    names: tuple[QueueName, ...] = ("active", "backoff", "unschedulable", "gated")
    entities = [e for name in names for e in queue.entities(name)] + queue.in_flight()
    seen = [
        first
        for e in entities
        if e.kind == "podgroup" and (first := queue.group_first_seen(e.key)) is not None
    ]
    return max(0.0, now - min(seen)) if seen else 0.0


def _rejections(queue: QueueView) -> dict[tuple[str, str], int]:
    """Pods waiting after a failed attempt, per plugin that rejected them. Upstream
    increments the gauge on a failure and decrements it on the next pop; the queue
    clears an entity's rejectors on pop, so reading them now gives the same count."""
    counts: dict[tuple[str, str], int] = {}
    names: tuple[QueueName, ...] = ("active", "backoff", "unschedulable")
    for name in names:
        for entity in queue.entities(name):
            plugins = entity.unschedulable_plugins | entity.pending_plugins
            if not plugins:
                continue
            n = len(entity.pods())
            profile = _profile_of(entity)
            for plugin in plugins:
                counts[(plugin, profile)] = counts.get((plugin, profile), 0) + n
    return counts
