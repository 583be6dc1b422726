"""How many binding cycles may be in flight: enough to keep up with the client's qps
at the API server's latency.

A binding holds its slot for about one API round trip, so ``n`` slots bind at most
``n / latency`` pods a second (Little's law): the fixed 64 of ``bindingConcurrency``
capped troupe at 515 bindings a second at 100 ms and 183 at 300 ms, below the
manifests' ``qps: 300``. kube-scheduler starts a goroutine per binding and leaves
the rate to the client's limiter; troupe keeps bounded slots (the loop's batching
below relies on them) and sizes them instead:

    limit = clamp(ceil(qps × p90 latency × MARGIN), bindingConcurrency, maxBindingConcurrency)

``qps`` is the client's write limit (``clientConnection.qps``; none: the ceiling),
``p90`` the 90th percentile of the latencies of the bindings answered since the last
adjustment, from the moment a request left the client (after its rate limiter) to
its answer, so waiting for a token never counts as latency. ``MARGIN`` (1.5) covers
the bindings slower than the p90 and the slots idle while the loop refills them.

More slots only help while the API server answers each binding in the time it
takes with few in flight. When it is the bottleneck (busy, not far away) its
latency grows with what is sent, and the rule above would grow the limit with it
to the ceiling for nothing. So the limit leaves ``bindingConcurrency`` only while
the median latency stays within ``QUEUEING`` (2) times the fastest binding seen in
the last ``BASE_WINDOWS`` adjustments: a server 300 ms away answers in 300–302 ms
however many are in flight; a saturated one on loopback answers the first of a
batch in 0.3 ms and the median in 5 ms.

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


def binding_limit(latencies: Sequence[float], base: float, bounds: Bounds) -> int:
    """The slots for bindings answered in ``latencies`` (seconds, at least one) when the
    fastest binding seen lately took ``base`` (see the module doc)."""
    ordered = sorted(latencies)
    if percentile(ordered, 0.5) > QUEUEING * base:
        return bounds.floor  # the server queues: more in flight would only wait there
    if bounds.qps is None:
        return bounds.ceiling
    wanted = math.ceil(bounds.qps * percentile(ordered, 0.9) * MARGIN)
    return max(bounds.floor, min(bounds.ceiling, wanted))


class BindingConcurrency:
    """Resizes the bindings' ``WorkerPool`` once per ``adjust`` (see the module doc)."""

    def __init__(
        self,
        pool: WorkerPool,
        bounds: Bounds,
        latencies: Callable[[], list[float]],
        *,
        on_change: Callable[[int], None] | None = None,
    ) -> None:
        self.pool = pool
        self.bounds = bounds
        self._take = latencies
        self._on_change = on_change
        self._pending: list[float] = []
        self._fastest: deque[float] = deque(maxlen=BASE_WINDOWS)

    @classmethod
    def for_client(
        cls,
        pool: WorkerPool,
        client: object,
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
        return cls(pool, bounds, client.take_binding_latencies, on_change=on_change)

    @property
    def limit(self) -> int:
        return self.pool.limit

    def adjust(self) -> int:
        """Take the latencies answered since the last call and resize the pool; the
        limit now."""
        self._pending += self._take()
        if len(self._pending) < MIN_SAMPLES:
            return self.pool.limit
        window, self._pending = self._pending, []
        self._fastest.append(min(window))
        limit = binding_limit(window, min(self._fastest), self.bounds)
        if limit != self.pool.limit:
            log.debug("binding concurrency", limit=limit, was=self.pool.limit)
            self.pool.resize(limit, refill=max(1, limit // 4))
            if self._on_change is not None:
                self._on_change(limit)
        return limit
