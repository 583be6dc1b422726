"""``/metrics`` rendered at most once per ``max_age`` seconds and served from a cache.

Rendering troupe's registry takes milliseconds of the event loop the scheduler runs
on (2.4 ms was measured with a full queue): sixteen clients scraping in a loop
halved the binding rate. ``HealthServer`` answers every scrape from
``CachedMetrics``, which renders each exposition format at most once per
``max_age`` (1 s by default, ``ServingLimits.metrics_max_age``) and compresses it at
most once too. Prometheus scrapes every 15 to 60 s, so a value is never older than
a scrape would expect; a scrape flood costs one render a second.

Two formats, chosen from the ``Accept`` header as prometheus_client's
``choose_encoder`` does: OpenMetrics 1.0.0 when the scraper names
``application/openmetrics-text``, else the Prometheus text format 0.0.4. Other
variants (versions, escaping schemes) are answered with one of these two, so a
client cannot defeat the cache by varying its header. ``name[]`` query parameters
are ignored (kube-scheduler's Go handler has none either): every scrape gets the
whole registry.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.registry import Collector

_TEXT = choose_encoder("")
_OPENMETRICS = choose_encoder("application/openmetrics-text; version=1.0.0")


def wants_openmetrics(accept: str) -> bool:
    return any(
        part.split(";")[0].strip().lower() == "application/openmetrics-text"
        for part in accept.split(",")
    )


@dataclass(frozen=True, slots=True)
class Exposition:
    body: bytes
    content_type: str
    gzipped: bool


class CachedMetrics:
    """The registry's exposition, at most ``max_age`` seconds old (see the module doc).
    ``renders`` counts the registry's renders."""

    def __init__(
        self,
        registry: Collector,
        *,
        max_age: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._max_age = max_age
        self._clock = clock
        # (openmetrics, gzipped) -> (rendered at, body)
        self._bodies: dict[tuple[bool, bool], tuple[float, bytes]] = {}
        self.renders = 0

    def get(self, accept: str, accept_encoding: str) -> Exposition:
        openmetrics = wants_openmetrics(accept)
        gzipped = gzip_accepted(accept_encoding)
        encoder, content_type = _OPENMETRICS if openmetrics else _TEXT
        now = self._clock()
        at, raw = self._fresh((openmetrics, False), now, lambda: encoder(self._registry))
        if gzipped:
            # Compressed once per render, not once per scrape.
            _, body = self._fresh((openmetrics, True), now, lambda: gzip.compress(raw), since=at)
        else:
            body = raw
        return Exposition(body, content_type, gzipped)

    def _fresh(
        self,
        key: tuple[bool, bool],
        now: float,
        make: Callable[[], bytes],
        since: float | None = None,
    ) -> tuple[float, bytes]:
        """The cached body of ``key``, or a new one from ``make``. A plain body expires
        after ``max_age``; a compressed one whenever its plain body was rendered anew
        (``since``)."""
        cached = self._bodies.get(key)
        if cached is not None:
            at, _ = cached
            expired = at != since if since is not None else not (0 <= now - at < self._max_age)
            if not expired:
                return cached
        if since is None:
            self.renders += 1
            entry = (now, make())
        else:
            entry = (since, make())
        self._bodies[key] = entry
        return entry
