"""Backoff math and the flushes that end waiting, driven by a FakeClock."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.status import Status
from troupe.queue import backoff_duration

from tests.plugins.builders import make_pod
from tests.queue.helpers import FIT, GANG, harness, pod


@pytest.mark.parametrize(
    ("attempts", "initial", "maximum", "seconds"),
    [
        pytest.param(0, 1.0, 10.0, 0.0, id="no attempt yet means no backoff"),
        pytest.param(1, 1.0, 10.0, 1.0, id="the first failure waits the initial backoff"),
        pytest.param(2, 1.0, 10.0, 2.0, id="the second doubles it"),
        pytest.param(4, 1.0, 10.0, 8.0, id="the fourth waits 8 s"),
        pytest.param(5, 1.0, 10.0, 10.0, id="the fifth is capped at the max"),
        pytest.param(10_000, 1.0, 10.0, 10.0, id="thousands of attempts stay at the max"),
        pytest.param(3, 0.5, 60.0, 2.0, id="a custom initial backoff doubles too"),
        pytest.param(3, 0.0, 10.0, 0.0, id="a zero initial backoff disables backoff"),
    ],
)
def test_backoff_duration(attempts: int, initial: float, maximum: float, seconds: float) -> None:
    assert backoff_duration(attempts, initial, maximum) == seconds


@settings(max_examples=200)
@given(
    attempts=st.integers(min_value=0, max_value=5000),
    initial=st.floats(min_value=0.0, max_value=100.0),
    extra=st.floats(min_value=0.0, max_value=1000.0),
)
def test_backoff_never_exceeds_the_max_and_never_shrinks(
    attempts: int, initial: float, extra: float
) -> None:
    maximum = initial + extra
    now = backoff_duration(attempts, initial, maximum)
    after = backoff_duration(attempts + 1, initial, maximum)
    assert 0.0 <= now <= maximum
    assert now <= after


def test_a_max_below_the_initial_backoff_is_refused() -> None:
    with pytest.raises(ValueError, match="initial"):
        harness(initial_backoff=5.0, max_backoff=1.0)


@pytest.mark.parametrize(
    ("failures", "backoff"),
    [
        pytest.param(1, 1.0, id="after one failure the pod is retried 1 s later"),
        pytest.param(3, 4.0, id="after three failures 4 s later"),
        pytest.param(6, 10.0, id="after six failures at the 10 s cap"),
    ],
)
def test_flush_backoff_completed_after_exactly_the_backoff(failures: int, backoff: float) -> None:
    h = harness()
    h.queue.add(pod("p"))
    for _ in range(failures):
        h.queue.activate(["default/p"])
        entity = h.pop()
        assert h.fail(entity, rejected_by=[]) == "backoff"
    assert entity.backoff_expiry == h.clock.now() + backoff
    h.clock.advance(backoff - 0.01)
    assert h.queue.flush_backoff_completed() == 0
    assert h.queue.where("default/p") == "backoff"
    h.clock.advance(0.01)
    assert h.queue.flush_backoff_completed() == 1
    assert h.queue.where("default/p") == "active"
    assert h.arrivals[-1] == ("active", "BackoffComplete")


def test_backoff_completes_in_expiry_order() -> None:
    h = harness()
    slow = h.add_and_fail(pod("slow"), rejected_by=[])  # 1 s from t=1000
    h.queue.activate(["default/slow"])
    h.fail(h.pop(), rejected_by=[])  # second failure: 2 s
    h.clock.advance(0.5)
    h.add_and_fail(pod("fast"), rejected_by=[])  # 1 s from t=1000.5
    h.clock.advance(1.0)
    assert h.queue.flush_backoff_completed() == 1
    assert h.queue.where("default/fast") == "active"
    assert h.queue.where(slow.key) == "backoff"


@pytest.mark.parametrize(
    ("waited", "queue"),
    [
        pytest.param(300.0, "unschedulable", id="a pod unschedulable for exactly 5 min stays"),
        pytest.param(300.5, "active", id="a pod unschedulable for longer is retried"),
    ],
)
def test_flush_unschedulable_leftover(waited: float, queue: str) -> None:
    h = harness()
    h.add_and_fail(pod("p"), rejected_by=[FIT])
    h.clock.advance(waited)
    h.queue.flush_unschedulable_leftover()
    assert h.queue.where("default/p") == queue
    if queue == "active":
        assert h.arrivals[-1] == ("active", "UnschedulableTimeout")


def test_a_leftover_pod_still_backing_off_goes_to_backoff() -> None:
    h = harness(max_backoff=60.0, max_in_unschedulable=5.0)
    h.queue.add(pod("p"))
    for _ in range(4):  # fourth failure: 8 s backoff
        h.queue.activate(["default/p"])
        entity = h.pop()
        h.fail(entity, rejected_by=[FIT])
    h.clock.advance(6.0)
    assert h.queue.flush_unschedulable_leftover() == 1
    assert h.queue.where("default/p") == "backoff"


def test_a_long_gated_pod_is_released_by_the_leftover_flush_once_its_gate_opens() -> None:
    open_gates: set[str] = set()
    h = harness(
        pre_enqueue=lambda p: Status() if p.key in open_gates else Status.unschedulable(plugin=GANG)
    )
    h.queue.add(pod("p"))
    h.clock.advance(301)
    h.queue.flush_unschedulable_leftover()
    assert h.queue.where("default/p") == "gated"
    open_gates.add("default/p")
    h.clock.advance(200)  # the failed re-check restarted its clock
    h.queue.flush_unschedulable_leftover()
    assert h.queue.where("default/p") == "gated"
    h.clock.advance(101)
    h.queue.flush_unschedulable_leftover()
    assert h.queue.where("default/p") == "active"
    assert h.arrivals == [("gated", "PodAdd"), ("active", "UnschedulableTimeout")]


def test_pre_enqueue_runs_when_entering_backoff_not_when_leaving_it() -> None:
    calls: list[str] = []

    def counting(p: object) -> Status:
        calls.append("pre_enqueue")
        return Status()

    h = harness(pre_enqueue=counting)
    h.add_and_fail(make_pod().name("p").obj(), rejected_by=[])
    assert len(calls) == 2  # add, then entering backoff
    h.clock.advance(1)
    h.queue.flush_backoff_completed()
    assert len(calls) == 2


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_run_flushes_on_the_injected_clock_until_closed() -> None:
    h = harness(max_in_unschedulable=20.0)
    h.add_and_fail(pod("backoff"), rejected_by=[])
    h.add_and_fail(pod("stuck"), rejected_by=[FIT])
    runner = asyncio.create_task(h.queue.run())
    await _settle()
    assert h.clock.sleepers == 2
    h.clock.advance(1.0)
    await _settle()
    assert h.queue.where("default/backoff") == "active"
    assert h.queue.where("default/stuck") == "unschedulable"
    for _ in range(29):
        h.clock.advance(1.0)
        await _settle()
    assert h.queue.where("default/stuck") == "active"
    h.queue.close()
    await asyncio.wait_for(runner, timeout=1.0)
    assert runner.done() and runner.exception() is None
