"""connect / check_reachable and the HTTP transport, against a tiny aiohttp server."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from aiohttp import web
from troupe.api.client import ApiError
from troupe.kube.connection import (
    EXTRA_CONNECTIONS,
    check_reachable,
    connect,
    env_proxy,
    kubeconfig_paths,
)
from troupe.kube.errors import KubeConnectionError
from troupe.kube.transport import HttpTransport, Timeouts

BIG = b"x" * 300_000


def write_kubeconfig(path: Path, server: str, token: str = "s3cret") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[web.Request]]]:
    seen: list[web.Request] = []
    release = asyncio.Event()

    async def version(request: web.Request) -> web.Response:
        seen.append(request)
        if request.headers.get("Authorization") != "Bearer s3cret":
            return web.json_response({"kind": "Status", "message": "Unauthorized"}, status=401)
        return web.json_response({"gitVersion": "v1.36.0"})

    async def stream(request: web.Request) -> web.StreamResponse:
        seen.append(request)
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(b'{"type":"ADDED"}\n\n{"type":"MODIFIED"}\n')
        await resp.write_eof()
        return resp

    async def pieces(request: web.Request) -> web.StreamResponse:
        # Lines cut across writes, one far over a read buffer, blank lines, and a
        # last line with no line end.
        resp = web.StreamResponse()
        await resp.prepare(request)
        for part in (b'{"a":', b'1}\n{"b"', b':2}\n\n \n{"big":"', BIG, b'"}\n', b'{"c":3}'):
            await resp.write(part)
            await asyncio.sleep(0)
        await resp.write_eof()
        return resp

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({})

    async def echo(request: web.Request) -> web.Response:
        seen.append(request)
        return web.Response(
            status=201,
            body=await request.read(),
            headers={"Retry-After": "3", "Content-Type": request.content_type},
        )

    app = web.Application()
    app.router.add_get("/version", version)
    app.router.add_get("/stream", stream)
    app.router.add_get("/pieces", pieces)
    app.router.add_get("/slow", slow)
    app.router.add_post("/echo", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", seen
    release.set()
    await runner.cleanup()


@pytest.mark.parametrize(
    ("explicit", "env", "expected"),
    [
        pytest.param("/a/config", "/b:/c", ["/a/config"], id="an explicit path wins"),
        pytest.param(None, "/b:/c", ["/b", "/c"], id="KUBECONFIG is a path list"),
        pytest.param(None, "", [str(Path.home() / ".kube" / "config")], id="the default"),
    ],
)
def test_kubeconfig_paths(
    explicit: str | None, env: str, expected: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", env)
    assert kubeconfig_paths(explicit) == expected


async def test_a_missing_kubeconfig_is_an_error_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "config"
    with pytest.raises(KubeConnectionError, match=str(missing)):
        await connect(str(missing), None, False)


async def test_a_broken_kubeconfig_is_an_error_naming_the_path(tmp_path: Path) -> None:
    bad = tmp_path / "config"
    bad.write_text("clusters: [")
    with pytest.raises(KubeConnectionError, match=str(bad)):
        await connect(str(bad), None, False)


async def test_in_cluster_outside_a_cluster_names_the_token_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeConnectionError, match="serviceaccount/token"):
        await connect(None, None, True)


async def test_kubeconfig_token_reaches_the_server_and_version_is_read(
    server: tuple[str, list[web.Request]], tmp_path: Path
) -> None:
    url, seen = server
    api = await connect(str(write_kubeconfig(tmp_path / "config", url)), None, False, pool_size=8)
    try:
        assert api.configuration.connection_pool_maxsize == 8 + EXTRA_CONNECTIONS
        assert await check_reachable(api) == "v1.36.0"
        assert seen[-1].headers["User-Agent"] == "troupe-scheduler"
    finally:
        await api.close()


async def test_a_given_user_agent_is_sent_on_requests_and_watches(
    server: tuple[str, list[web.Request]], tmp_path: Path
) -> None:
    url, seen = server
    agent = "troupe-scheduler/0.1.0 (a_0c4f)"
    path = str(write_kubeconfig(tmp_path / "config", url))
    api = await connect(path, None, False, user_agent=agent)
    try:
        assert await check_reachable(api) == "v1.36.0"
        async with HttpTransport(api).stream("/stream", query={}, timeout=2.0) as s:
            assert [line async for line in s.lines()]
        assert [r.headers["User-Agent"] for r in seen] == [agent, agent]
    finally:
        await api.close()


async def test_master_overrides_the_kubeconfig_server(
    server: tuple[str, list[web.Request]], tmp_path: Path
) -> None:
    url, _ = server
    path = write_kubeconfig(tmp_path / "config", "https://elsewhere.invalid:6443")
    api = await connect(str(path), url, False)
    try:
        assert api.configuration.host == url
        assert await check_reachable(api) == "v1.36.0"
    finally:
        await api.close()


async def test_rejected_credentials_are_named(
    server: tuple[str, list[web.Request]], tmp_path: Path
) -> None:
    url, _ = server
    api = await connect(str(write_kubeconfig(tmp_path / "c", url, token="wrong")), None, False)
    try:
        with pytest.raises(KubeConnectionError, match="rejected the credentials"):
            await check_reachable(api)
    finally:
        await api.close()


async def test_an_unreachable_server_is_an_error_naming_the_url(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    api = await connect(None, url, False)
    try:
        with pytest.raises(KubeConnectionError, match=url):
            await check_reachable(api, timeout=2.0)
    finally:
        await api.close()


async def test_transport_sends_bytes_as_is_and_reads_raw_replies(
    server: tuple[str, list[web.Request]], tmp_path: Path
) -> None:
    url, _ = server
    api = await connect(str(write_kubeconfig(tmp_path / "config", url)), None, False)
    try:
        t = HttpTransport(api, Timeouts(connect=1.0, total=0.3))
        resp = await t.request(
            "POST", "/echo", body=b'{"a":1}', content_type="application/merge-patch+json"
        )
        assert (resp.status, resp.body, resp.retry_after) == (201, b'{"a":1}', "3")
        async with t.stream("/stream", query={"watch": "true"}, timeout=2.0) as s:
            assert s.status == 200
            assert [line async for line in s.lines()] == [
                b'{"type":"ADDED"}',
                b'{"type":"MODIFIED"}',
            ]
        async with t.stream("/pieces", query={"watch": "true"}, timeout=2.0) as s:
            assert [line async for line in s.lines()] == [
                b'{"a":1}',
                b'{"b":2}',
                b'{"big":"' + BIG + b'"}',
                b'{"c":3}',
            ]
        with pytest.raises(ApiError) as err:
            await t.request("GET", "/slow")
        assert err.value.status == 0 and "timed out" in err.value.message
    finally:
        await api.close()


@pytest.mark.parametrize(
    ("env", "url", "proxy"),
    [
        pytest.param(
            {"HTTPS_PROXY": "http://proxy:3128"},
            "https://api:6443",
            "http://proxy:3128",
            id="an https server uses HTTPS_PROXY",
        ),
        pytest.param(
            {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "api"},
            "https://api:6443",
            None,
            id="NO_PROXY exempts the server",
        ),
        pytest.param(
            {"HTTP_PROXY": "http://proxy:3128"},
            "https://api:6443",
            None,
            id="HTTP_PROXY does not apply to https",
        ),
        pytest.param({}, "http://127.0.0.1:1234", None, id="no proxy variables"),
    ],
)
def test_env_proxy(
    env: dict[str, str], url: str, proxy: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "NO_PROXY",
        "no_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert env_proxy(url) == proxy


async def test_the_session_resolves_the_environment_once_not_per_request(
    server: tuple[str, list[web.Request]],
) -> None:
    url, _ = server
    api = await connect(None, url, False, pool_size=4)
    try:
        session = api.rest_client.pool_manager
        assert session.trust_env is False
        assert session.connector is not None and session.connector.limit == 4 + EXTRA_CONNECTIONS
    finally:
        await api.close()
    assert session.closed
