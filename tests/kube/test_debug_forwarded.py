"""``/debug/troupe/explain`` takes the caller's bearer token from ``Authorization``, or,
when the API server's pod proxy consumed that header, from ``X-Troupe-Authorization``
(``troupe.kube.health``); and the client's helpers that find the scheduler's pod
(``troupe.kube.debug``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry
from troupe.kube.debug import DebugEndpointError, ask_scheduler, debug_port, holder_pod
from troupe.kube.debug_auth import StaticToken
from troupe.kube.health import EXPLAIN_PATH, FORWARDED_AUTHORIZATION, HealthServer
from troupe.sim.kubeconfig import write_kubeconfig

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


async def test_a_proxy_the_api_server_refuses_is_told_apart_from_the_scheduler(
    tmp_path: Path,
) -> None:
    """An API server (a stub) that lets the caller read the Lease and the pod but not
    ``get`` ``pods/proxy``: its 403 Status says the scheduler was not reached."""

    async def handler(request: web.Request) -> web.Response:
        if request.path.endswith("/leases/troupe-scheduler"):
            return web.json_response({"spec": {"holderIdentity": "sched-0_1234"}})
        if request.path.endswith("/pods/sched-0"):
            return web.json_response({"spec": {"containers": [{}]}})
        forbidden = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 403,
                     "message": 'pods "sched-0" is forbidden: User "bob" cannot get resource '
                                '"pods/proxy"', "reason": "Forbidden"}  # fmt: skip
        return web.json_response(forbidden, status=403)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        kubeconfig = write_kubeconfig(
            tmp_path / "kc", f"http://127.0.0.1:{runner.addresses[0][1]}", token="bob"
        )
        with pytest.raises(DebugEndpointError) as refused:
            await ask_scheduler(
                str(kubeconfig), None, False, None,
                leases=[("troupe-system", "troupe-scheduler")],
                kind="podgroup", namespace="ml", name="train",
            )  # fmt: skip
    finally:
        await runner.cleanup()
    assert refused.value.status == 0
    assert str(refused.value) == (
        "the API server refused the proxy to the scheduler pod troupe-system/sched-0 (through "
        'the API server): 403 pods "sched-0" is forbidden: User "bob" cannot get resource '
        '"pods/proxy"'
    )
