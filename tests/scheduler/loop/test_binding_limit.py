"""How many bindings may be in flight: enough for the client's qps at the API server's
latency (Little's law) when the slots are what holds bindings back, never outside
[bindingConcurrency, maxBindingConcurrency], never up while slots sit empty, and back
to the floor when the server queues what it is sent."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from troupe.api.tasks import WorkerPool
from troupe.scheduler.loop.binding_limit import (
    BUSY,
    MARGIN,
    MIN_SAMPLES,
    QUEUEING,
    BindingConcurrency,
    Bounds,
    binding_limit,
    percentile,
)

latency = st.floats(min_value=1e-4, max_value=5.0, allow_nan=False)
bounds = st.builds(
    lambda floor, extra, qps: Bounds(floor, floor + extra, qps),
    st.integers(1, 128),
    st.integers(0, 1024),
    st.one_of(st.none(), st.floats(min_value=1.0, max_value=10_000.0)),
)
latencies = st.lists(latency, min_size=1, max_size=64)
slots = st.integers(1, 2048)
rate = st.floats(min_value=0.0, max_value=100_000.0)


def in_flight(lat: list[float], per_second: float) -> float:
    return per_second * sum(lat) / len(lat)


def median(lat: list[float]) -> float:
    return percentile(sorted(lat), 0.5)


@given(latencies, latency, bounds, slots, rate)
def test_the_limit_stays_within_its_bounds(
    lat: list[float], base: float, b: Bounds, current: int, per_second: float
) -> None:
    limit = binding_limit(lat, min(base, *lat), b, current=current, rate=per_second)
    assert b.floor <= limit <= b.ceiling


@given(latencies, bounds, slots)
def test_busy_slots_suffice_for_the_qps_at_the_p90_latency_unless_capped(
    lat: list[float], b: Bounds, current: int
) -> None:
    """Little's law: n slots each held p90 seconds carry n / p90 bindings a second."""
    base = min(lat)
    if median(lat) > QUEUEING * base:
        return  # a queueing server: another test
    busy = current / (sum(lat) / len(lat))  # every slot at the server
    limit = binding_limit(lat, base, b, current=current, rate=busy)
    if b.qps is None or limit == b.ceiling:
        assert limit == b.ceiling or b.floor == limit
        return
    assert limit / percentile(sorted(lat), 0.9) >= b.qps * MARGIN * (1 - 1e-9)


@given(latencies, bounds, slots, rate)
def test_slots_sitting_empty_are_never_added_to(
    lat: list[float], b: Bounds, current: int, per_second: float
) -> None:
    """Bindings at the server fill less than BUSY of the slots: the scheduler, not the
    slots, holds them back."""
    if in_flight(lat, per_second) >= BUSY * current:
        return
    limit = binding_limit(lat, min(lat), b, current=current, rate=per_second)
    assert limit <= max(b.floor, current)


@given(latencies, bounds, slots, rate)
def test_a_server_whose_median_is_more_than_twice_its_fastest_gets_the_floor(
    lat: list[float], b: Bounds, current: int, per_second: float
) -> None:
    base = min(lat) / (QUEUEING * 1.01)
    assert binding_limit(lat, base, b, current=current, rate=per_second) == b.floor


@given(latencies, bounds, slots, rate, st.floats(1.0, 10.0))
def test_a_higher_qps_never_lowers_the_limit(
    lat: list[float], b: Bounds, current: int, per_second: float, more: float
) -> None:
    if b.qps is None:
        return
    faster = Bounds(b.floor, b.ceiling, b.qps * more)
    base = min(lat)
    slower = binding_limit(lat, base, b, current=current, rate=per_second)
    assert binding_limit(lat, base, faster, current=current, rate=per_second) >= slower


@pytest.mark.parametrize(
    ("latency_s", "qps", "expected"),
    [
        pytest.param(0.3, 300, math.ceil(300 * 0.3 * MARGIN), id="300 ms at qps 300: 135"),
        pytest.param(0.1, 300, 64, id="100 ms at qps 300: the floor already carries 640/s"),
        pytest.param(0.3, 5000, 512, id="300 ms at qps 5000: the ceiling"),
        pytest.param(0.002, 100_000, math.ceil(100_000 * 0.002 * MARGIN), id="2 ms, qps 100000"),
    ],
)
def test_figures_with_every_slot_busy(latency_s: float, qps: float, expected: int) -> None:
    steady = [latency_s] * 32
    limit = binding_limit(steady, latency_s, Bounds(64, 512, qps), current=64, rate=64 / latency_s)
    assert limit == expected


class Latencies:
    """A client's binding latencies, handed out as ``take_binding_latencies`` does."""

    def __init__(self) -> None:
        self.waiting: list[float] = []

    def answer(self, *seconds: float) -> None:
        self.waiting += seconds

    def take(self) -> list[float]:
        taken, self.waiting = self.waiting, []
        return taken


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def controller(qps: float = 300.0) -> tuple[BindingConcurrency, Latencies, list[int], Clock]:
    source = Latencies()
    changes: list[int] = []
    clock = Clock()
    pool = WorkerPool("binding", limit=64, refill=16)
    bounds = Bounds(64, 512, qps)
    control = BindingConcurrency(pool, bounds, source.take, clock, on_change=changes.append)
    return control, source, changes, clock


def test_the_pool_follows_a_slow_server_up_and_back_down() -> None:
    control, source, changes, clock = controller()
    clock.now += 0.5
    source.answer(*[0.3] * (MIN_SAMPLES - 1))
    assert control.adjust() == 64  # too few answers yet: kept for the next time
    clock.now += 0.5
    # 64 slots held 300 ms each: 213 answers a second, every slot busy.
    source.answer(*[0.3] * (213 - MIN_SAMPLES + 1))
    assert control.adjust() == 135
    assert (control.pool.limit, control.pool.refill) == (135, 33)
    # The server is near again: the floor carries the qps.
    clock.now += 1
    source.answer(*[0.002] * 300)
    assert control.adjust() == 64
    assert (control.pool.limit, control.pool.refill) == (64, 16)
    assert changes == [135, 64]


def test_a_server_that_slows_as_it_is_sent_more_keeps_the_floor() -> None:
    """Loopback, saturated: the first of a batch answers in 0.3 ms, the rest queue.
    With ``bench e2e``'s qps of 100000, qps x p90 would ask for the ceiling."""
    control, source, changes, clock = controller(qps=100_000)
    for _ in range(5):
        clock.now += 1
        source.answer(*[0.0003 * (i + 1) for i in range(32)] * 200)
        assert control.adjust() == 64
    assert changes == []


def test_a_slow_scheduler_with_empty_slots_keeps_the_floor() -> None:
    """The latencies look steady but few bindings are in flight (the scheduler itself
    is slow, as under valgrind): more slots would sit empty too."""
    control, source, changes, clock = controller(qps=100_000)
    for _ in range(5):
        clock.now += 1
        source.answer(*[0.1] * 200)  # 200 a second at 100 ms: 20 of 64 slots busy
        assert control.adjust() == 64
    assert changes == []


def test_the_fastest_binding_is_remembered_across_adjustments() -> None:
    """A window where every binding queued is judged against the fastest seen before."""
    control, source, _, clock = controller()
    clock.now += 1
    source.answer(*[0.0005] * MIN_SAMPLES)
    control.adjust()
    clock.now += 1
    source.answer(*[0.3] * 213)  # all slow now, every slot busy: the server queues
    assert control.adjust() == 64


def test_a_window_starts_when_answers_start_coming() -> None:
    """Idle adjustments move the window's start, so the first busy second after a
    quiet spell is not diluted by it."""
    control, source, _, clock = controller()
    for _ in range(30):
        clock.now += 1
        assert control.adjust() == 64
    clock.now += 1
    source.answer(*[0.3] * 213)
    assert control.adjust() == 135


def test_only_a_client_that_times_its_bindings_gets_a_controller() -> None:
    pool = WorkerPool("binding", limit=8)

    class Times:
        write_qps = 300.0

        def take_binding_latencies(self) -> list[float]:
            return []

    now = Clock()
    assert BindingConcurrency.for_client(pool, Times(), now, floor=8, ceiling=64) is not None
    assert BindingConcurrency.for_client(pool, object(), now, floor=8, ceiling=64) is None
    # A ceiling at the floor fixes the slots: nothing to adjust.
    assert BindingConcurrency.for_client(pool, Times(), now, floor=8, ceiling=8) is None
