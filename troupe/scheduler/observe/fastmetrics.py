"""Counter and histogram families recorded without locks, exposed through prometheus_client.

``SchedulerMetrics`` records every pod attempt, extension-point duration, SLI sample,
queue arrival and HTTP request here. prometheus_client's ``Counter`` and ``Histogram``
children take a ``threading.Lock`` per value (a histogram observation takes two: the
sum and one bucket) and walk the bucket list in Python to find the bucket. At the ten
recordings a scheduled pod makes (eight observations, two increments) that measured
11-13 µs per pod, about a sixth of the ~75 µs troupe spends on a pod in ``bench
basic``; these families record the same in about 3 µs. All recording happens on the
asyncio event-loop thread, and so do scrapes (``troupe.kube.health`` renders the
registry inside an aiohttp handler), so the locks protect nothing.

Here a labelled child is a plain object: ``CounterChild.inc`` is one float add;
``HistogramChild.observe`` appends to a list, which is put in its buckets in bulk
when collected (or once ``FOLD_AT`` observations wait). Bucket counts are kept per
bucket and made cumulative when collected. Each family is a prometheus_client
collector registered on the same registry, in the same order, and emits the samples
the prometheus_client type would: the same family name (a counter's without
``_total``), HELP and TYPE, label order, ``le`` strings from prometheus_client's own
``floatToGoString``, ``_count``, ``_sum`` and ``_created`` (the child's creation time;
left out when prometheus_client's created series are disabled).
``tests/scheduler/observe/test_fastmetrics.py`` holds the two renderings equal.

Collection must run on the thread that records, as troupe's scrapes do: bucketing
the waiting observations of a histogram is not atomic, so a scrape from another
thread could count a batch twice.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable, Iterable, Sequence
from functools import reduce
from typing import Generic, TypeVar

import numpy as np
import prometheus_client.metrics
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

_format_bound: Callable[[float], str] = floatToGoString
"""prometheus_client's ``le`` formatting ("0.001", "2.56", "+Inf"), kept identical."""


def _created_series_enabled() -> bool:
    """prometheus_client's switch (``PROMETHEUS_DISABLE_CREATED_SERIES`` or
    ``disable_created_metrics()``), read at each scrape as its own metrics do."""
    return bool(vars(prometheus_client.metrics).get("_use_created", True))


class CounterChild:
    """One labelled series of a counter."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.value += amount


FOLD_AT = 512
"""Observations a histogram child holds before it puts them in their buckets."""


class HistogramChild:
    """One labelled series of a histogram: per-bucket counts (the last is +Inf) and
    the sum of the observations.

    An observation is appended to a list; the list is put in its buckets in one
    go (a numpy search) when ``counts`` or ``sum`` is read, as a scrape does, or
    once ``FOLD_AT`` observations wait. A scheduled pod makes eight observations,
    and finding each one's bucket as it came was most of their cost. The sum adds
    the observations one by one, in order, as observing them one at a time did."""

    __slots__ = ("_counts", "_edges", "_pending", "_sum", "created")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._edges = np.asarray(bounds, dtype=np.float64)
        self._counts = [0] * len(bounds)
        self._sum = 0.0
        self._pending: list[float] = []
        self.created = time.time()

    def observe(self, amount: float) -> None:
        pending = self._pending
        pending.append(amount)
        if len(pending) >= FOLD_AT:
            self._fold()

    @property
    def counts(self) -> list[int]:
        """Observations per bucket (not cumulative), the last bucket +Inf's."""
        self._fold()
        return self._counts

    @property
    def sum(self) -> float:
        self._fold()
        return self._sum

    def _fold(self) -> None:
        pending = self._pending
        n = len(pending)
        if not n:
            return
        values = pending[:n]
        del pending[:n]  # one step: an observation made meanwhile stays pending
        self._sum = reduce(operator.add, values, self._sum)
        counts = self._counts
        # The first bucket whose upper bound is >= the value (le is inclusive). NaN
        # lands in no bucket, as in prometheus_client.
        array = np.asarray(values, dtype=np.float64)
        index = np.searchsorted(self._edges, array[array == array], side="left")
        for i, found in enumerate(np.bincount(index, minlength=len(counts)).tolist()):
            if found:
                counts[i] += found


C = TypeVar("C", CounterChild, HistogramChild)


class _Family(Collector, Generic[C]):
    """Children by label values, created on first use, collected in that order."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        registry: CollectorRegistry | None,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], C] = {}
        if not self.labelnames:
            # An unlabelled metric has its one series from the start, as prometheus_client's.
            self._children[()] = self._new_child()
        if registry is not None:
            registry.register(self)

    def _new_child(self) -> C:
        raise NotImplementedError

    def labels(self, *values: str) -> C:
        """The child of these label values (in ``labelnames`` order)."""
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
            child = self._children[values] = self._new_child()
        return child

    def _type(self) -> str:
        raise NotImplementedError

    def describe(self) -> Iterable[Metric]:
        return [Metric(self.name, self.documentation, self._type())]

    def _series(self) -> list[tuple[dict[str, str], C]]:
        names = self.labelnames
        return [
            (dict(zip(names, values, strict=True)), c) for values, c in list(self._children.items())
        ]


class CounterFamily(_Family[CounterChild]):
    """A counter; ``name`` may end in ``_total`` (dropped from the family name, added to
    the sample name, as prometheus_client's ``Counter`` does)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        registry: CollectorRegistry | None,
    ) -> None:
        super().__init__(name.removesuffix("_total"), documentation, labelnames, registry)

    def _new_child(self) -> CounterChild:
        return CounterChild()

    def _type(self) -> str:
        return "counter"

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self.name, self.documentation, "counter")
        total, created = self.name + "_total", self.name + "_created"
        with_created = _created_series_enabled()
        for labels, child in self._series():
            metric.add_sample(total, labels, child.value)
            if with_created:
                metric.add_sample(created, labels, child.created)
        return [metric]


class HistogramFamily(_Family[HistogramChild]):
    """A histogram with fixed upper bounds; +Inf is appended when missing."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry | None,
    ) -> None:
        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds):
            raise ValueError(f"{name}: buckets not in sorted order")
        if not bounds or bounds[-1] != math.inf:
            bounds.append(math.inf)
        if len(bounds) < 2:
            raise ValueError(f"{name}: a histogram needs at least two buckets")
        if "le" in labelnames:
            raise ValueError(f"{name}: 'le' is reserved for histogram buckets")
        self.bounds = tuple(bounds)
        self._le = tuple(_format_bound(b) for b in bounds)
        super().__init__(name, documentation, labelnames, registry)

    def _new_child(self) -> HistogramChild:
        return HistogramChild(self.bounds)

    def _type(self) -> str:
        return "histogram"

    def collect(self) -> Iterable[Metric]:
        name = self.name
        metric = Metric(name, self.documentation, "histogram")
        bucket, count, total, created = (
            name + s for s in ("_bucket", "_count", "_sum", "_created")
        )
        with_sum = self.bounds[0] >= 0  # prometheus_client omits _sum with negative buckets
        with_created = _created_series_enabled()
        for labels, child in self._series():
            acc = 0.0
            for le, n in zip(self._le, tuple(child.counts), strict=True):
                acc += n
                metric.add_sample(bucket, {**labels, "le": le}, acc)
            metric.add_sample(count, labels, acc)
            if with_sum:
                metric.add_sample(total, labels, child.sum)
            if with_created:
                metric.add_sample(created, labels, child.created)
        return [metric]
