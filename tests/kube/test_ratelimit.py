"""The write limiter: client-go's token bucket on the injected clock."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.clock import FakeClock
from troupe.kube.ratelimit import DEFAULT_BURST, DEFAULT_QPS, KeyedBuckets, TokenBucket


@pytest.mark.parametrize(
    ("qps", "burst", "free", "then_wait"),
    [
        pytest.param(10.0, 3, 3, 0.1, id="a burst of 3 passes, the 4th waits one token (0.1 s)"),
        pytest.param(2.0, 1, 1, 0.5, id="burst 1 at 2 qps: the second waits half a second"),
        pytest.param(0.0, 0, DEFAULT_BURST, 1 / DEFAULT_QPS, id="qps 0 means client-go's 5/10"),
    ],
)
def test_burst_then_paced(qps: float, burst: int, free: int, then_wait: float) -> None:
    bucket = TokenBucket(qps, burst, FakeClock())
    assert [bucket.reserve() for _ in range(free)] == [0.0] * free
    assert bucket.reserve() == pytest.approx(then_wait)


def test_negative_qps_disables_limiting() -> None:
    bucket = TokenBucket(-1.0, 1, FakeClock())
    assert all(bucket.reserve() == 0.0 for _ in range(1000))
    assert bucket.try_acquire()


def test_tokens_refill_with_time_up_to_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1.0, 2, clock)
    assert bucket.try_acquire() and bucket.try_acquire() and not bucket.try_acquire()
    clock.advance(1.0)
    assert bucket.try_acquire() and not bucket.try_acquire()
    clock.advance(100.0)
    assert bucket.tokens == 2.0


async def test_waiters_are_served_in_arrival_order_on_the_fake_clock() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1.0, 1, clock)
    done: list[int] = []

    async def take(i: int) -> None:
        await bucket.acquire()
        done.append(i)

    tasks = [asyncio.create_task(take(i)) for i in range(3)]
    await asyncio.sleep(0)
    assert done == [0]
    clock.advance(1.0)
    await asyncio.sleep(0)
    assert done == [0, 1]
    clock.advance(1.0)
    await asyncio.gather(*tasks)
    assert done == [0, 1, 2]
    assert bucket.waits == 2 and bucket.waited_seconds == pytest.approx(3.0)


async def test_a_cancelled_waiter_gives_its_token_back() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1.0, 1, clock)
    await bucket.acquire()
    waiter = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0)
    assert bucket.tokens == -1.0
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert bucket.tokens == 0.0


@settings(max_examples=150, deadline=None)
@given(
    qps=st.floats(0.1, 100.0),
    burst=st.integers(1, 50),
    gaps=st.lists(st.floats(0.0, 2.0), min_size=1, max_size=60),
)
def test_grants_never_exceed_burst_plus_rate(qps: float, burst: int, gaps: list[float]) -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps, burst, clock)
    start = clock.now()
    granted = 0
    for gap in gaps:
        clock.advance(gap)
        granted += bucket.try_acquire()
        assert granted <= burst + (clock.now() - start) * qps + 1e-9


def test_keyed_buckets_are_independent_and_bounded() -> None:
    clock = FakeClock()
    buckets = KeyedBuckets(1.0 / 300.0, 2, clock, max_keys=3)
    assert buckets.try_acquire("a") and buckets.try_acquire("a")
    assert not buckets.try_acquire("a")
    assert buckets.try_acquire("b")
    for key in ("c", "d", "e"):
        buckets.try_acquire(key)
    assert len(buckets) == 3
    # "a" was evicted (least recently used) and starts again with a full bucket.
    assert buckets.try_acquire("a")
    clock.advance(300.0)
    assert buckets.try_acquire("e") and buckets.try_acquire("e")


def test_a_forgotten_key_loses_its_bucket() -> None:
    buckets = KeyedBuckets(1.0 / 300.0, 1, FakeClock())
    assert buckets.try_acquire("a") and not buckets.try_acquire("a")
    buckets.forget("a")
    buckets.forget("never seen")
    assert len(buckets) == 0
    assert buckets.try_acquire("a")  # a full bucket again
