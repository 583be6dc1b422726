"""``/debug/troupe/explain`` takes the caller's bearer token from ``Authorization``, or,
when the API server's pod proxy consumed that header, from ``X-Troupe-Authorization``
(``troupe.kube.health``); and the client's helpers that find the scheduler's pod
(``troupe.kube.debug``)."""

from __future__ import annotations

from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry
from troupe.kube.debug import debug_port, holder_pod
from troupe.kube.debug_auth import StaticToken
from troupe.kube.health import EXPLAIN_PATH, FORWARDED_AUTHORIZATION, HealthServer

TOKEN = "the-debug-token-0123456789"


def record(kind: str, namespace: str, name: str, sub: str) -> dict[str, Any] | None:
    return {"kind": kind, "name": f"{namespace}/{name}"}


async def status(base: str, headers: dict[str, str]) -> int:
    query = {"kind": "pod", "namespace": "ml", "name": "p"}
    async with (
        aiohttp.ClientSession() as session,
        session.get(base + EXPLAIN_PATH, params=query, headers=headers) as resp,
    ):
        return resp.status


async def test_the_forwarded_header_is_checked_as_authorization_is() -> None:
    server = HealthServer(
        "127.0.0.1",
        0,
        CollectorRegistry(),
        live=lambda: True,
        ready=lambda: True,
        explain=record,
        debug_auth=StaticToken(TOKEN),
    )
    base = f"http://127.0.0.1:{await server.start()}"
    good, bad = f"Bearer {TOKEN}", "Bearer not-the-token"
    try:
        assert await status(base, {}) == 401
        assert await status(base, {FORWARDED_AUTHORIZATION: good}) == 200
        assert await status(base, {FORWARDED_AUTHORIZATION: bad}) == 403
        # Authorization wins when both are present.
        assert await status(base, {"Authorization": bad, FORWARDED_AUTHORIZATION: good}) == 403
        assert await status(base, {"Authorization": good, FORWARDED_AUTHORIZATION: bad}) == 200
    finally:
        await server.stop()


def test_the_pod_and_port_of_a_lease_holder() -> None:
    assert holder_pod("troupe-scheduler-7d9c-x2_0f6c1f8e-3a2b") == "troupe-scheduler-7d9c-x2"
    assert holder_pod("plain-name") == "plain-name"
    ports = [{"name": "http", "containerPort": 80}, {"name": "metrics", "containerPort": 9999}]
    pod = {"spec": {"containers": [{"ports": ports}]}}
    assert debug_port(pod) == 9999
    assert debug_port({"spec": {"containers": [{}]}}) == 10259
