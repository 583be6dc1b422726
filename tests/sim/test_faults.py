"""Fault injection: failed and slow requests answer proper Status bodies (429 with
Retry-After), counted rules expire, and open watch streams can be cut mid-stream."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest
from troupe.sim.apiserver import ApiServer

from tests.sim.conftest import Http, pod, status

PODS = "/api/v1/namespaces/default/pods"


async def test_failure_twice_then_success(http: Http, server: ApiServer) -> None:
    await http.post(PODS, pod("a"))
    server.faults.fail("POST", r"/pods/[^/]+/binding$", 500, times=2)
    body = {"metadata": {"name": "a"}, "target": {"kind": "Node", "name": "n1"}}
    codes = [(await http.post(f"{PODS}/a/binding", body))[0] for _ in range(3)]
    assert codes == [500, 500, 201]


async def test_injected_failure_is_a_status_body(http: Http, server: ApiServer) -> None:
    server.faults.fail("*", r"^/api/v1/namespaces/default/pods$", 500)
    expected = status(500, "InternalError", "Internal error occurred: injected fault", {})
    assert await http.get(PODS) == (500, expected)


async def test_too_many_requests_has_retry_after(http: Http, server: ApiServer) -> None:
    server.faults.fail("GET", "/pods", 429, times=1, retry_after=2)
    async with http.session.get(http.base + PODS) as response:
        assert response.status == 429
        assert response.headers["Retry-After"] == "2"
        body = await response.json()
    assert body == status(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        {"retryAfterSeconds": 2},
    )
    assert (await http.get(PODS))[0] == 200


@pytest.mark.parametrize(
    ("method", "path", "matches"),
    [
        pytest.param("POST", PODS, False, id="other methods are untouched"),
        pytest.param("GET", "/api/v1/nodes", False, id="other paths are untouched"),
        pytest.param("GET", PODS, True, id="the matching request fails"),
    ],
)
async def test_rules_match_method_and_path(
    http: Http, server: ApiServer, method: str, path: str, matches: bool
) -> None:
    server.faults.fail("GET", "pods$", 503, times=-1)
    code, _ = await http.request(method, path, pod("a") if method == "POST" else None)
    assert (code == 503) is matches


async def test_reset_clears_rules(http: Http, server: ApiServer) -> None:
    server.faults.fail("*", ".*", 500, times=-1)
    server.faults.reset()
    assert (await http.get("/version"))[0] == 200


async def test_delay_slows_only_the_counted_requests(http: Http, server: ApiServer) -> None:
    server.faults.delay("GET", "^/version$", 0.3, times=1)
    started = time.monotonic()
    await http.get("/version")
    slow = time.monotonic() - started
    started = time.monotonic()
    await http.get("/version")
    assert slow >= 0.3 and time.monotonic() - started < 0.3


async def test_drop_watches_cuts_open_streams_mid_stream(http: Http, server: ApiServer) -> None:
    await http.post(PODS, pod("a"))
    received: list[str] = []

    async def read() -> None:
        async with http.session.get(
            http.base + PODS, params={"watch": "1", "resourceVersion": "0"}
        ) as response:
            async for line in response.content:
                received.append(json.loads(line)["type"])

    reading = asyncio.ensure_future(read())
    while not received:
        await asyncio.sleep(0.02)
    assert server.faults.drop_watches() == 1
    with pytest.raises(aiohttp.ClientError):
        await asyncio.wait_for(reading, 2)
    assert received == ["ADDED"]
