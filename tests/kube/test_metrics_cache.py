"""``/metrics`` is rendered at most once per ``metrics_max_age`` and served from the
cache in between, whatever the number of scrapers, in both exposition formats and
compressed; the clock is frozen, so every scrape inside the interval hits the cache."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Iterator

import aiohttp
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from troupe.kube.http_guard import ServingLimits

from tests.kube.health_clients import Frozen, serving


class Counting:
    """A collector that counts how often the registry is rendered."""

    def __init__(self) -> None:
        self.collects = 0

    def collect(self) -> Iterator[Metric]:
        self.collects += 1
        yield GaugeMetricFamily("troupe_test_renders", "Renders so far.", value=self.collects)


def registry_counting() -> tuple[CollectorRegistry, Counting]:
    registry = CollectorRegistry(auto_describe=False)
    counting = Counting()
    registry.register(counting)
    return registry, counting


async def scrape(
    session: aiohttp.ClientSession, base: str, **headers: str
) -> tuple[str, str, bytes]:
    # aiohttp's client asks for gzip unless told otherwise.
    headers = {"Accept-Encoding": "identity", **headers}
    async with session.get(base + "/metrics", headers=headers, auto_decompress=False) as r:
        assert r.status == 200
        return r.headers["Content-Type"], r.headers.get("Content-Encoding", ""), await r.read()


def renders_in(text: str) -> float:
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == "troupe_test_renders"]
    return family.samples[0].value


async def test_concurrent_scrapes_within_the_interval_render_once() -> None:
    registry, counting = registry_counting()
    clock = Frozen()
    async with (
        serving(registry, limits=ServingLimits(metrics_max_age=1.0), clock=clock) as server,
        aiohttp.ClientSession() as session,
    ):
        base = f"http://127.0.0.1:{server.port}"
        replies = await asyncio.gather(*(scrape(session, base) for _ in range(50)))
        assert counting.collects == server.metrics.renders == 1
        assert {body for _, _, body in replies} == {replies[0][2]}
        assert renders_in(replies[0][2].decode()) == 1
        assert replies[0][0].startswith("text/plain; version=0.0.4")

        # Compressed from the same render.
        _, encoding, body = await scrape(session, base, **{"Accept-Encoding": "gzip"})
        assert encoding == "gzip" and gzip.decompress(body) == replies[0][2]
        assert counting.collects == 1

        # The interval passed: the next scrape renders again, once.
        clock.now += 1.0
        replies = await asyncio.gather(*(scrape(session, base) for _ in range(20)))
        assert counting.collects == 2
        assert renders_in(replies[0][2].decode()) == 2
        _, _, body = await scrape(session, base, **{"Accept-Encoding": "gzip"})
        assert renders_in(gzip.decompress(body).decode()) == 2


async def test_each_format_is_rendered_once_per_interval_whatever_the_header_says() -> None:
    registry, counting = registry_counting()
    async with (
        serving(registry, clock=Frozen()) as server,
        aiohttp.ClientSession() as session,
    ):
        base = f"http://127.0.0.1:{server.port}"
        accepts = [
            "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3",
            "application/openmetrics-text; version=1.0.0; escaping=allow-utf-8",
            "application/openmetrics-text; version=9.9.9",
            "text/plain;version=1.0.0;escaping=allow-utf-8",
            "*/*",
            "",
        ]
        for accept in accepts * 5:
            content_type, _, body = await scrape(session, base, Accept=accept)
            openmetrics = accept.startswith("application/openmetrics-text")
            assert content_type.startswith(
                "application/openmetrics-text; version=1.0.0" if openmetrics else "text/plain"
            )
            assert body.endswith(b"# EOF\n") == openmetrics
        assert counting.collects == 2  # one render per format


async def test_a_zero_max_age_renders_every_scrape() -> None:
    """The cache can be turned off (``metrics_max_age=0``), as before it existed: a
    check that the counting above can see renders at all."""
    registry, counting = registry_counting()
    async with (
        serving(registry, limits=ServingLimits(metrics_max_age=0.0), clock=Frozen()) as server,
        aiohttp.ClientSession() as session,
    ):
        base = f"http://127.0.0.1:{server.port}"
        for _ in range(5):
            await scrape(session, base)
        assert counting.collects == 5
