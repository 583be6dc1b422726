"""How many binding cycles may be in flight: enough to keep up with the client's qps
at the API server's latency.

A binding holds its slot for about one API round trip, so ``n`` slots bind at most
``n / latency`` pods a second (Little's law): the fixed 64 of ``bindingConcurrency``
capped troupe at 515 bindings a second at 100 ms and 183 at 300 ms, below the
manifests' ``qps: 300``. kube-scheduler starts a goroutine per binding and leaves
the rate to the client's limiter; troupe keeps bounded slots (the loop's batching
below relies on them) and sizes them instead:

    limit = clamp(ceil(qps × p90 latency × MARGIN), bindingConcurrency, maxBindingConcurrency)

when the slots are busy (below). ``qps`` is the client's write limit
(``clientConnection.qps``; none: the ceiling), ``p90`` the 90th percentile of the
latencies of the bindings answered since the last adjustment, from the moment a
request left the client (after its rate limiter) to its answer, so waiting for a
token never counts as latency. ``MARGIN`` (1.5) covers the bindings slower than the
p90 and the slots idle while the loop refills them.

More slots only help when two things hold, and the limit grows only then:

- **The slots are what holds bindings back**: the bindings in flight at the API
  server, by Little's law the rate they were answered at times their mean latency,
  fill at least ``BUSY`` (75%) of the slots. When the scheduler itself is the
  bottleneck (a busy process, a slow loop), slots sit empty and more would change
  nothing; the limit may then come down to the rule's value, never go up.
- **The API server is not**: a server that is the bottleneck (busy, not far away)
  answers more slowly the more it is sent, and the rule would grow the limit with
  its own latency up to the ceiling. So the limit is ``bindingConcurrency`` while
  the median latency is more than ``QUEUEING`` (2) times the fastest binding seen in
  the last ``BASE_WINDOWS`` adjustments: a server 300 ms away answers in 300–302 ms
  however many are in flight; a saturated one on loopback answers the first of a
  batch in 0.3 ms and the median in 5–11 ms.

The loop's housekeeping calls ``adjust`` once a second (a sweep the composition
root, ``troupe.scheduler.service.wiring``, adds); it resizes the
``WorkerPool`` of bindings, whose refill stays a quarter of the limit (the loop
schedules a quarter of the slots in a row once that many are free, so their
requests leave together: docs/architecture.md, data flow step 4). The decision is
the pure ``binding_limit``; docs/configuration.md and docs/benchmarks.md have the
figures.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import structlog

from troupe.api.client import TimesBindings
from troupe.api.tasks import WorkerPool

log = structlog.get_logger("troupe.scheduler")

MARGIN: Final = 1.5
QUEUEING: Final = 2.0
BUSY: Final = 0.75
MIN_SAMPLES: Final = 16
"""Latencies needed before the limit moves (fewer are kept for the next adjustment)."""
BASE_WINDOWS: Final = 30
"""Adjustments over which the fastest binding is remembered."""


@dataclass(frozen=True, slots=True)
class Bounds:
    floor: int
    """``bindingConcurrency``: never fewer slots."""
    ceiling: int
    """``maxBindingConcurrency``: never more."""
    qps: float | None
    """The client's write limit; None: unlimited."""


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ascending ``ordered``, nearest rank."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def binding_limit(
    latencies: Sequence[float], base: float, bounds: Bounds, *, current: int, rate: float
) -> int:
    """The slots for bindings answered in ``latencies`` (seconds, at least one), ``rate``
    of them a second, with ``current`` slots, when the fastest binding seen lately took
    ``base`` (see the module doc)."""
    ordered = sorted(latencies)
    if percentile(ordered, 0.5) > QUEUEING * base:
        return bounds.floor  # the server queues: more in flight would only wait there
    if bounds.qps is None:
        wanted = bounds.ceiling
    else:
        wanted = math.ceil(bounds.qps * percentile(ordered, 0.9) * MARGIN)
    wanted = max(bounds.floor, min(bounds.ceiling, wanted))
    in_flight = rate * sum(ordered) / len(ordered)  # Little's law
    if in_flight >= BUSY * current:
        return wanted
    return max(bounds.floor, min(current, wanted))  # slots to spare: never more


class BindingConcurrency:
    """Resizes the bindings' ``WorkerPool`` once per ``adjust`` (see the module doc)."""

    def __init__(
        self,
        pool: WorkerPool,
        bounds: Bounds,
        latencies: Callable[[], list[float]],
        now: Callable[[], float],
        *,
        on_change: Callable[[int], None] | None = None,
    ) -> None:
        """``now``: the scheduler's monotonic clock, for the rate bindings are answered at."""
        self.pool = pool
        self.bounds = bounds
        self._take = latencies
        self._now = now
        self._on_change = on_change
        self._pending: list[float] = []
        self._since = now()
        self._fastest: deque[float] = deque(maxlen=BASE_WINDOWS)

    @classmethod
    def for_client(
        cls,
        pool: WorkerPool,
        client: object,
        now: Callable[[], float],
        *,
        floor: int,
        ceiling: int,
        on_change: Callable[[int], None] | None = None,
    ) -> BindingConcurrency | None:
        """The controller for a client that times its bindings; None for one that does
        not (the pool then keeps ``floor`` slots)."""
        if not isinstance(client, TimesBindings) or ceiling <= floor:
            return None
        bounds = Bounds(floor, ceiling, client.write_qps)
        return cls(pool, bounds, client.take_binding_latencies, now, on_change=on_change)

    @property
    def limit(self) -> int:
        return self.pool.limit

    def adjust(self) -> int:
        """Take the latencies answered since the last call and resize the pool; the
        limit now."""
        now = self._now()
        taken = self._take()
        if not taken and not self._pending:
            self._since = now  # nothing answered: the next window starts now
            return self.pool.limit
        self._pending += taken
        if len(self._pending) < MIN_SAMPLES:
            return self.pool.limit
        window, self._pending = self._pending, []
        rate = len(window) / max(now - self._since, 1e-3)
        self._since = now
        self._fastest.append(min(window))
        limit = binding_limit(
            window, min(self._fastest), self.bounds, current=self.pool.limit, rate=rate
        )
        if limit != self.pool.limit:
            log.debug("binding concurrency", limit=limit, was=self.pool.limit)
            self.pool.resize(limit, refill=max(1, limit // 4))
            if self._on_change is not None:
                self._on_change(limit)
        return limit
