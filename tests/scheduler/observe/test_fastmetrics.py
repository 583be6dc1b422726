"""fastmetrics families expose exactly what prometheus_client's Counter and Histogram
expose for the same recordings: the same text (classic and OpenMetrics, ``_created``
included, under one frozen clock), the same ``get_sample_value`` for every sample, and
the registry sees the same names."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import prometheus_client.metrics
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from troupe.scheduler.observe.fastmetrics import FOLD_AT, CounterFamily, HistogramFamily
from troupe.scheduler.observe.metrics import ATTEMPT_BUCKETS, POD_ATTEMPTS_BUCKETS, REST_BUCKETS

Recording = tuple[tuple[str, ...], float]
"""Label values, then the amount (counter increment or histogram observation)."""

NEEDS_ESCAPING = ('quote " in', "back\\slash", "new\nline", "ünïcode ✓")


class Clock:
    """``time.time`` for both libraries: each recording happens one second later, so
    ``_created`` shows when each series was first used."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.25

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(time, "time", fake)
    return fake


@pytest.fixture(params=[True, False], ids=["with _created", "created series disabled"])
def created_series(request: pytest.FixtureRequest) -> Iterator[bool]:
    if not request.param:
        prometheus_client.metrics.disable_created_metrics()
    try:
        yield request.param
    finally:
        prometheus_client.metrics.enable_created_metrics()


Pair = tuple[CollectorRegistry, Callable[..., Any], CollectorRegistry, Callable[..., Any]]


def counters(labelnames: Sequence[str]) -> Pair:
    fast, ref = CollectorRegistry(), CollectorRegistry()
    family = CounterFamily("things_done_total", "Things done.", labelnames, registry=fast)
    twin = Counter("things_done_total", "Things done.", labelnames, registry=ref)
    return fast, family.labels, ref, (twin.labels if labelnames else lambda: twin)


def histograms(labelnames: Sequence[str], buckets: Sequence[float]) -> Pair:
    fast, ref = CollectorRegistry(), CollectorRegistry()
    family = HistogramFamily("wait_seconds", "Waits.", labelnames, buckets=buckets, registry=fast)
    twin = Histogram("wait_seconds", "Waits.", labelnames, buckets=buckets, registry=ref)
    return fast, family.labels, ref, (twin.labels if labelnames else lambda: twin)


def replay(pair: Pair, method: str, recordings: Sequence[Recording], clock: Clock) -> None:
    _, fast_child, _, ref_child = pair
    for labels, amount in recordings:
        clock.now += 1
        getattr(fast_child(*labels), method)(amount)
        getattr(ref_child(*labels), method)(amount)


def comparable(value: float) -> object:
    return "NaN" if math.isnan(value) else value


def assert_same_exposition(fast: CollectorRegistry, ref: CollectorRegistry) -> None:
    assert generate_latest(fast).decode() == generate_latest(ref).decode()
    assert generate_openmetrics(fast).decode() == generate_openmetrics(ref).decode()
    ref_samples = [s for m in ref.collect() for s in m.samples]
    fast_samples = [s for m in fast.collect() for s in m.samples]
    assert [(s.name, s.labels) for s in fast_samples] == [(s.name, s.labels) for s in ref_samples]
    for s in ref_samples:
        value = fast.get_sample_value(s.name, s.labels)
        assert value is not None and comparable(value) == comparable(s.value)
        assert type(value) is type(s.value)


COUNTER_CASES = [
    pytest.param((), [], id="an unlabelled counter shows 0 before any increment"),
    pytest.param((), [((), 1.0), ((), 1.0), ((), 0.5)], id="unlabelled, by ones and a half"),
    pytest.param(("result",), [], id="a labelled counter has no series until one is used"),
    pytest.param(
        ("result", "profile"),
        [(("scheduled", "p"), 1.0), (("error", "p"), 1.0), (("scheduled", "p"), 1.0)],
        id="series appear in first-use order with their own _created",
    ),
    pytest.param(
        ("code",),
        [((v,), 1.0) for v in NEEDS_ESCAPING],
        id="label values with quotes, backslashes, newlines and unicode are escaped alike",
    ),
]


@pytest.mark.parametrize(("labelnames", "recordings"), COUNTER_CASES)
def test_a_counter_exposes_what_prometheus_client_does(
    labelnames: tuple[str, ...],
    recordings: list[Recording],
    clock: Clock,
    created_series: bool,
) -> None:
    pair = counters(labelnames)
    replay(pair, "inc", recordings, clock)
    assert_same_exposition(pair[0], pair[2])


_just_above = [math.nextafter(b, math.inf) for b in ATTEMPT_BUCKETS]

HISTOGRAM_CASES = [
    pytest.param((), ATTEMPT_BUCKETS, [], id="an unlabelled histogram shows zero buckets at once"),
    pytest.param(
        (),
        ATTEMPT_BUCKETS,
        [((), b) for b in ATTEMPT_BUCKETS],
        id="a value exactly on a bound counts in that bound's bucket",
    ),
    pytest.param(
        (),
        ATTEMPT_BUCKETS,
        [((), b) for b in _just_above],
        id="a value just above a bound counts in the next bucket",
    ),
    pytest.param(
        (),
        ATTEMPT_BUCKETS,
        [((), 20.0), ((), math.inf), ((), 1e300)],
        id="values above the last bound count only in +Inf",
    ),
    pytest.param(
        (),
        ATTEMPT_BUCKETS,
        [((), 0.0), ((), -1.0), ((), -math.inf)],
        id="zero and negative values count in the first bucket",
    ),
    pytest.param(
        (),
        ATTEMPT_BUCKETS,
        [((), 0.003), ((), math.nan), ((), 0.0)],
        id="NaN counts in no bucket and makes the sum NaN",
    ),
    pytest.param(
        (),
        POD_ATTEMPTS_BUCKETS,
        [((), 1), ((), 2), ((), 3), ((), 16), ((), 17)],
        id="integer observations on integer bounds (le 1.0, 2.0, ...)",
    ),
    pytest.param(
        ("verb", "host"),
        REST_BUCKETS,
        [(("GET", "h:1"), 0.005), (("POST", "h:1"), 0.3), (("GET", "h:1"), 60.0)],
        id="labelled series, le after the labels",
    ),
    pytest.param(
        ("host",),
        (0.5, 1e6, 1.5e7, math.inf),
        [((v,), 2e6) for v in NEEDS_ESCAPING],
        id="large bounds in Go's exponent form, explicit +Inf, escaped labels",
    ),
    pytest.param(
        (),
        (-1.0, 0.0, 1.0),
        [((), -2.0), ((), 0.5)],
        id="with a negative bound there is no _sum",
    ),
]


@pytest.mark.parametrize(("labelnames", "buckets", "recordings"), HISTOGRAM_CASES)
def test_a_histogram_exposes_what_prometheus_client_does(
    labelnames: tuple[str, ...],
    buckets: tuple[float, ...],
    recordings: list[Recording],
    clock: Clock,
    created_series: bool,
) -> None:
    pair = histograms(labelnames, buckets)
    replay(pair, "observe", recordings, clock)
    assert_same_exposition(pair[0], pair[2])


_amounts = st.one_of(
    st.sampled_from(ATTEMPT_BUCKETS),
    st.floats(min_value=0.0, max_value=40.0),
    st.integers(min_value=0, max_value=100),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", 'c"']), _amounts), max_size=40))
def test_any_observations_expose_alike(observations: list[tuple[str, float]]) -> None:
    pair = histograms(("k",), ATTEMPT_BUCKETS)
    _, fast_child, _, ref_child = pair
    for label, amount in observations:
        fast_child(label).observe(amount)
        ref_child(label).observe(amount)
    fast, ref = pair[0], pair[2]
    for metric in ref.collect():
        for s in metric.samples:
            if not s.name.endswith("_created"):
                assert fast.get_sample_value(s.name, s.labels) == s.value


def test_families_keep_their_place_among_prometheus_client_metrics(clock: Clock) -> None:
    """Registered in turn with other metrics, the text comes out in the same order."""
    fast, ref = CollectorRegistry(), CollectorRegistry()
    CounterFamily("a_total", "A.", registry=fast).labels().inc()
    Counter("a_total", "A.", registry=ref).inc()
    for registry in (fast, ref):
        Gauge("b", "B.", registry=registry).set(3)
    HistogramFamily("c", "C.", ["x"], buckets=(1.0,), registry=fast).labels("y").observe(0.5)
    Histogram("c", "C.", ["x"], buckets=(1.0,), registry=ref).labels("y").observe(0.5)
    assert_same_exposition(fast, ref)


@pytest.mark.parametrize(
    ("register_fast", "clash"),
    [
        pytest.param(
            lambda r: CounterFamily("a_total", "A.", registry=r),
            lambda r: Counter("a", "A.", registry=r),
            id="a counter family and a Counter of the same name",
        ),
        pytest.param(
            lambda r: HistogramFamily("h", "H.", buckets=(1.0,), registry=r),
            lambda r: Gauge("h_count", "H.", registry=r),
            id="a histogram family and a gauge named like its _count",
        ),
    ],
)
def test_the_registry_refuses_a_clashing_name(
    register_fast: Callable[[CollectorRegistry], object],
    clash: Callable[[CollectorRegistry], object],
) -> None:
    registry = CollectorRegistry()
    register_fast(registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        clash(registry)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(
            lambda: HistogramFamily("h", "H.", buckets=(2.0, 1.0), registry=None),
            "not in sorted order",
            id="unsorted buckets",
        ),
        pytest.param(
            lambda: HistogramFamily("h", "H.", buckets=(), registry=None),
            "at least two buckets",
            id="no bucket but +Inf",
        ),
        pytest.param(
            lambda: HistogramFamily("h", "H.", ["le"], buckets=(1.0,), registry=None),
            "reserved",
            id="an le label",
        ),
        pytest.param(
            lambda: HistogramFamily("h", "H.", ["a", "b"], buckets=(1.0,), registry=None).labels(
                "x"
            ),
            "expected labels",
            id="too few label values",
        ),
        pytest.param(
            lambda: CounterFamily("c", "C.", registry=None).labels().inc(-1),
            "non-negative",
            id="a counter going down",
        ),
    ],
)
def test_misuse_is_refused(build: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


@settings(max_examples=25, deadline=None)
@given(
    amounts=st.lists(
        st.one_of(_amounts, st.sampled_from([math.nan, math.inf, -1.0, 0.0])),
        max_size=3 * FOLD_AT + 40,
    ),
    scrapes=st.sets(st.integers(min_value=0, max_value=3 * FOLD_AT + 40), max_size=4),
)
def test_observations_held_back_and_bucketed_in_bulk_expose_alike(
    amounts: list[float], scrapes: set[int]
) -> None:
    """A child holds observations back and buckets them in bulk, when scraped or
    once ``FOLD_AT`` wait: at any scrape, buckets, count and sum (NaN included, the
    sum added in the same order) are prometheus_client's."""
    pair = histograms((), ATTEMPT_BUCKETS)
    fast, fast_child, ref, ref_child = pair
    for n, amount in enumerate(amounts):
        if n in scrapes:
            assert_same_exposition_values(fast, ref)
        fast_child().observe(amount)
        ref_child().observe(amount)
    assert_same_exposition_values(fast, ref)


def assert_same_exposition_values(fast: CollectorRegistry, ref: CollectorRegistry) -> None:
    for metric in ref.collect():
        for s in metric.samples:
            if not s.name.endswith("_created"):
                value = fast.get_sample_value(s.name, s.labels)
                assert value is not None and comparable(value) == comparable(s.value)


@pytest.mark.parametrize("count", [FOLD_AT - 1, FOLD_AT, 3 * FOLD_AT + 5])
def test_every_bound_nan_and_infinity_land_as_prometheus_client_puts_them(count: int) -> None:
    """Values on the bounds (``le`` is inclusive), between them, beyond the last,
    NaN and infinities, bucketed in bulk at a scrape and once FOLD_AT wait."""
    values = [*ATTEMPT_BUCKETS, 0.0, -1.0, math.inf, math.nan, 7, 1e-9, 1e9]
    values += [b * 1.5 for b in ATTEMPT_BUCKETS]
    pair = histograms((), ATTEMPT_BUCKETS)
    fast, fast_child, ref, ref_child = pair
    for n in range(count):
        fast_child().observe(values[n % len(values)])
        ref_child().observe(values[n % len(values)])
        if n == 10:  # a scrape with a few held back
            assert_same_exposition_values(fast, ref)
    assert_same_exposition_values(fast, ref)
