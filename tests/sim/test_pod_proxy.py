"""The pods' ``proxy`` subresource of the embedded API server: forwarded to the pod's IP
and port with the method, path, query, body and headers, never the caller's
``Authorization``; upstream's refusals; and through the real kubectl
(``kubectl get --raw``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from troupe.sim.apiserver import ApiServer
from troupe.sim.apiserver.auth.authenticator import TokenUsers

from tests.sim.conftest import Http, kubectl, pod


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    """A web server on loopback answering every request with what it received."""

    async def handler(request: web.Request) -> web.Response:
        seen: dict[str, Any] = {
            "method": request.method,
            "path": request.path,
            "query": dict(request.query),
            "headers": {k.lower(): v for k, v in request.headers.items()},
            "body": (await request.read()).decode(),
        }
        return web.json_response(seen, status=207 if request.path == "/odd" else 200)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield int(runner.addresses[0][1])
    await runner.cleanup()


def on_loopback(server: ApiServer, name: str, ip: str | None = "127.0.0.1") -> None:
    obj = pod(name)
    obj["metadata"]["namespace"] = "default"
    server.store.create("pods", obj)
    if ip is not None:
        server.store.patch_status("pods", name, {"phase": "Running", "podIP": ip}, "default")


async def test_a_request_reaches_the_pod_without_the_callers_credentials(
    server: ApiServer, http: Http, echo: int
) -> None:
    on_loopback(server, "web")
    base = f"/api/v1/namespaces/default/pods/web:{echo}/proxy"
    headers = {"Authorization": "Bearer secret", "X-Extra": "kept", "Impersonate-User": "root"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            server.url + base + "/debug/x/",
            params={"kind": "pod", "name": "a b"},
            data=b"payload",
            headers=headers,
        ) as resp,
    ):
        assert resp.status == 200
        seen = json.loads(await resp.text())
    assert seen["method"] == "POST"
    assert seen["path"] == "/debug/x/"
    assert seen["query"] == {"kind": "pod", "name": "a b"}
    assert seen["body"] == "payload"
    assert seen["headers"]["x-extra"] == "kept"
    assert "authorization" not in seen["headers"]
    assert "impersonate-user" not in seen["headers"]
    # The pod's status comes back as it is; the scheme may be named.
    code, _ = await http.get(f"/api/v1/namespaces/default/pods/http:web:{echo}/proxy/odd")
    assert code == 207


async def test_refusals_as_upstream(server: ApiServer, http: Http, echo: int) -> None:
    code, body = await http.get(f"/api/v1/namespaces/default/pods/nope:{echo}/proxy/")
    assert (code, body["reason"], body["message"]) == (404, "NotFound", 'pods "nope" not found')
    on_loopback(server, "pending", ip=None)
    code, body = await http.get(f"/api/v1/namespaces/default/pods/pending:{echo}/proxy/")
    assert code == 503 and body["message"].startswith("error trying to reach service: ")
    on_loopback(server, "down")
    code, body = await http.get("/api/v1/namespaces/default/pods/down:1/proxy/")
    assert code == 503 and body["reason"] == "ServiceUnavailable"
    code, body = await http.get(f"/api/v1/namespaces/default/pods/ftp:down:{echo}/proxy/")
    assert code == 400


async def test_the_caller_must_authenticate_first(echo: int, tmp_path: Path) -> None:
    users = TokenUsers.of([("t0ken", "alice", "1", ())])
    async with ApiServer(token="admin-token", token_users=users) as api:
        on_loopback(api, "web")
        path = f"{api.url}/api/v1/namespaces/default/pods/web:{echo}/proxy/x"
        async with aiohttp.ClientSession() as session:
            async with session.get(path) as resp:
                assert resp.status == 401
            async with session.get(path, headers={"Authorization": "Bearer t0ken"}) as resp:
                assert resp.status == 200


async def test_kubectl_get_raw_through_the_proxy(
    server: ApiServer, kubeconfig: Path, echo: int
) -> None:
    on_loopback(server, "web")
    code, out, err = await kubectl(
        kubeconfig, "get", "--raw", f"/api/v1/namespaces/default/pods/web:{echo}/proxy/hi?x=1"
    )
    assert code == 0, err
    seen = json.loads(out)
    assert (seen["path"], seen["query"]) == ("/hi", {"x": "1"})
