"""Client-side rate limiting of API writes, on the injected Clock.

``TokenBucket`` is client-go's ``flowcontrol.NewTokenBucketRateLimiter`` (qps tokens
per second, ``burst`` banked): ``KubeClient`` acquires one token per write attempt
(binding, status patch, delete, eviction, custom-object patch), so a burst of
binding cycles cannot exceed ``clientConnection.qps/burst``. The event recorder has
its own bucket, as kube-scheduler's events go through a separate client.
``KeyedBuckets`` keeps one non-blocking bucket per key in an LRU (client-go's
``EventSourceObjectSpamFilter``: 4096 keys).

Waiting uses reservations (as golang.org/x/time/rate): a caller takes a token now,
possibly driving the balance negative, and sleeps until it would have been
refilled, so waiters are served in arrival order and none spins.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from troupe.api.clock import Clock

# client-go rest.Config defaults when clientConnection leaves qps/burst at 0.
DEFAULT_QPS = 5.0
DEFAULT_BURST = 10


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` banked. A negative qps disables
    limiting (client-go: a rate limiter is only built when qps > 0)."""

    def __init__(self, qps: float, burst: int, clock: Clock) -> None:
        self.unlimited = qps < 0
        self.qps = DEFAULT_QPS if qps == 0 else qps
        self.burst = DEFAULT_BURST if burst <= 0 else burst
        self._clock = clock
        self._tokens = float(self.burst)
        self._last = clock.now()
        self.waits = 0
        self.waited_seconds = 0.0

    def _refill(self) -> None:
        now = self._clock.now()
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
            self._last = now

    @property
    def tokens(self) -> float:
        """The balance now (negative while callers wait for reserved tokens)."""
        self._refill()
        return self._tokens

    def try_acquire(self) -> bool:
        """Take a token if one is banked; never waits."""
        if self.unlimited:
            return True
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def reserve(self) -> float:
        """Take a token now; the seconds to wait before using it."""
        if self.unlimited:
            return 0.0
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def acquire(self) -> float:
        """Wait for a token; the seconds waited."""
        delay = self.reserve()
        if delay <= 0:
            return 0.0
        return await self.wait(delay)

    async def wait(self, delay: float) -> float:
        """Wait ``delay`` (> 0) seconds for a token ``reserve`` took; the seconds waited.
        ``acquire`` is ``reserve`` and then this when there is a wait: a caller that
        reserves itself awaits nothing when a token is banked."""
        self.waits += 1
        self.waited_seconds += delay
        try:
            await self._clock.sleep(delay)
        except asyncio.CancelledError:
            # The reserved token was never used: give it back.
            self._tokens += 1.0
            raise
        return delay


class KeyedBuckets:
    """One non-blocking ``TokenBucket`` per key, least recently used evicted."""

    def __init__(self, qps: float, burst: int, clock: Clock, max_keys: int = 4096) -> None:
        self._qps = qps
        self._burst = burst
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: OrderedDict[object, TokenBucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def try_acquire(self, key: object) -> bool:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = TokenBucket(self._qps, self._burst, self._clock)
            self._buckets[key] = bucket
            if len(self._buckets) > self._max_keys:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
        return bucket.try_acquire()

    def forget(self, key: object) -> None:
        """Drop ``key``'s bucket (its object is gone for good)."""
        self._buckets.pop(key, None)
