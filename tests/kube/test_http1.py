"""``HttpTransport`` over the ``http1`` pool, against a scripted raw HTTP server:
framing, connection reuse and loss, timeouts, the pool limit, credentials."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes_asyncio.client import ApiClient
from troupe.api.client import ApiError
from troupe.scheduler.kube.connection import connect
from troupe.scheduler.kube.http1 import Http1Pool, encode_request
from troupe.scheduler.kube.http1_pools import pool_for
from troupe.scheduler.kube.transport import (
    NO_REPLY,
    HttpTransport,
    Timeouts,
    observe_requests,
)

from tests.kube.scripted_http import Request, Route, ScriptedServer, answer, reply, reset

LARGE = bytes(range(256)) * 32768  # 8 MiB


async def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


@asynccontextmanager
async def client(
    server: ScriptedServer, *, limit: int | None = None, total: float = 5.0
) -> AsyncIterator[tuple[HttpTransport, ApiClient]]:
    api = await connect(None, server.url, False)
    if limit is not None:
        api.configuration.connection_pool_maxsize = limit
    try:
        yield HttpTransport(api, Timeouts(connect=1.0, total=total)), api
    finally:
        await api.close()


def route(fn: Callable[[Request, asyncio.StreamWriter], Awaitable[bool]]) -> Route:
    return fn


@route
async def chunked(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    for piece in (b"5\r\nhello\r\n", b"6\r\n, worl\r\n", b"1\r\nd\r\n", b"0\r\n\r\n"):
        await w.drain()
        w.write(piece)
    await w.drain()
    return True


@route
async def split(req: Request, w: asyncio.StreamWriter) -> bool:
    raw = reply(200, b'{"split":"across writes"}')
    for i in range(0, len(raw), 7):
        w.write(raw[i : i + 7])
        await w.drain()
    return True


@route
async def large(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(reply(200, LARGE))
    await w.drain()
    return True


@route
async def large_chunked(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    for i in range(0, len(LARGE), 100_000):
        piece = LARGE[i : i + 100_000]
        w.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        await w.drain()
    w.write(b"0\r\n\r\n")
    return True


@route
async def close(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(reply(200, b"{}", {"Connection": "close"}))
    await w.drain()
    return False


@route
async def until_close(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(b"HTTP/1.1 200 OK\r\n\r\nthe body ends when the connection does")
    await w.drain()
    return False


@route
async def bye(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(reply())  # promises keep-alive, then closes the idle connection anyway
    await w.drain()
    return False


@route
async def drop(req: Request, w: asyncio.StreamWriter) -> bool:
    return False  # reads the request, closes without a byte of reply


@route
async def cut(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{partial")
    await w.drain()
    reset(w)
    return False


@route
async def unasked(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(reply(200, b"{}") + b"HTTP/1.1 200 OK\r\n")  # a second, unasked-for reply
    await w.drain()
    return True


@route
async def echo(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(reply(200, json.dumps({"target": req.target, "headers": req.headers}).encode()))
    await w.drain()
    return True


def routes(**extra: Route) -> dict[str, Route]:
    return {
        "/chunked": chunked,
        "/split": split,
        "/large": large,
        "/large-chunked": large_chunked,
        "/close": close,
        "/until-close": until_close,
        "/retry": answer(429, b'{"kind":"Status","message":"slow down"}', {"Retry-After": "7"}),
        "/bye": bye,
        "/drop": drop,
        "/cut": cut,
        "/extra": unasked,
        "*": echo,
        **extra,
    }


@pytest.mark.parametrize(
    ("path", "status", "body", "retry_after", "connections"),
    [
        pytest.param("/chunked", 200, b"hello, world", None, 1, id="a chunked body"),
        pytest.param(
            "/split", 200, b'{"split":"across writes"}', None, 1, id="a reply split in 7 bytes"
        ),
        pytest.param("/large", 200, LARGE, None, 1, id="an 8 MiB body by length"),
        pytest.param("/large-chunked", 200, LARGE, None, 1, id="an 8 MiB chunked body"),
        pytest.param(
            "/retry", 429, b'{"kind":"Status","message":"slow down"}', "7", 1, id="Retry-After"
        ),
        pytest.param("/close", 200, b"{}", None, 2, id="Connection: close is not reused"),
        pytest.param(
            "/until-close",
            200,
            b"the body ends when the connection does",
            None,
            2,
            id="a body until close",
        ),
        pytest.param(
            "/extra", 200, b"{}", None, 2, id="a connection that sent too much is dropped"
        ),
    ],
)
async def test_a_reply_is_read_and_the_next_request_gets_a_sound_connection(
    path: str, status: int, body: bytes, retry_after: str | None, connections: int
) -> None:
    async with ScriptedServer(routes()) as server, client(server) as (http, _):
        resp = await http.request("GET", path)
        assert (resp.status, resp.body, resp.retry_after) == (status, body, retry_after)
        after = await http.request("GET", "/ok")
        assert after.status == 200
        assert [r.connection for r in server.requests] == [1, connections]


async def test_retry_after_reaches_the_error() -> None:
    async with ScriptedServer(routes()) as server, client(server) as (http, _):
        err = (await http.request("POST", "/retry", body=b"{}")).error("create")
        assert (err.status, err.retry_after, err.message) == (429, 7.0, "create: slow down")


async def test_an_idle_connection_the_server_closed_is_replaced_without_an_error() -> None:
    async with ScriptedServer(routes()) as server, client(server) as (http, api):
        assert (await http.request("GET", "/bye")).status == 200
        pool = pool_for(api)
        assert pool is not None
        await eventually(lambda: pool.connections == 0)  # the client has seen the close
        assert (await http.request("POST", "/ok", body=b"{}")).status == 200
        assert [r.connection for r in server.requests] == [1, 2]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("/drop", "closed the connection before the response", id="no reply"),
        pytest.param("/cut", "ConnectionResetError", id="a reset in the middle of the body"),
    ],
)
async def test_a_connection_lost_after_the_request_was_sent_is_a_status_0_error(
    path: str, message: str
) -> None:
    async with ScriptedServer(routes()) as server, client(server) as (http, _):
        with pytest.raises(ApiError) as err:
            await http.request("POST", path, body=b'{"kind":"Binding"}')
        assert err.value.status == 0
        assert f"POST {path}" in err.value.message and message in err.value.message
        assert (await http.request("GET", "/ok")).status == 200
        assert len([r for r in server.requests if r.target == path]) == 1  # never resent


async def test_a_server_that_never_answers_times_out_and_frees_the_connection() -> None:
    async def silent(req: Request, w: asyncio.StreamWriter) -> bool:
        await server.release.wait()
        return False

    async with (
        ScriptedServer(routes(**{"/silent": silent})) as server,
        client(server, limit=1, total=0.2) as (http, _),
    ):
        with pytest.raises(ApiError) as err:
            await http.request("POST", "/silent", body=b"{}")
        assert err.value.status == 0 and "timed out" in err.value.message
        assert (await http.request("GET", "/ok")).status == 200  # the one slot is free again


async def test_requests_beyond_the_pool_wait_for_a_connection_and_none_is_lost() -> None:
    gate, full = asyncio.Event(), asyncio.Event()
    held = 0

    async def hold(req: Request, w: asyncio.StreamWriter) -> bool:
        nonlocal held
        held += 1
        if held == 3:
            full.set()
        await gate.wait()
        w.write(reply(200, req.headers["x-id"].encode() if "x-id" in req.headers else req.body))
        await w.drain()
        return True

    async with (
        ScriptedServer(routes(**{"/hold": hold})) as server,
        client(server, limit=3) as (http, _),
    ):
        calls = [
            asyncio.create_task(http.request("POST", "/hold", body=str(i).encode()))
            for i in range(12)
        ]
        await full.wait()
        assert server.open_now == 3 and not any(c.done() for c in calls)
        gate.set()
        replies = await asyncio.gather(*calls)
        assert [r.body for r in replies] == [str(i).encode() for i in range(12)]
        assert server.max_open == 3 and server.connections == 3


async def test_a_cancelled_request_drops_its_connection_and_frees_its_slot() -> None:
    arrived = asyncio.Event()

    async def stall(req: Request, w: asyncio.StreamWriter) -> bool:
        arrived.set()
        await server.release.wait()
        return False

    async with (
        ScriptedServer(routes(**{"/stall": stall})) as server,
        client(server, limit=1) as (http, _),
    ):
        call = asyncio.create_task(http.request("GET", "/stall"))
        await arrived.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert (await http.request("GET", "/ok")).status == 200
        assert [r.connection for r in server.requests] == [1, 2]


async def test_a_refused_connection_is_a_status_0_error() -> None:
    async with ScriptedServer(routes()) as server:
        url = server.url
    api = await connect(None, url, False)
    try:
        with pytest.raises(ApiError) as err:
            await HttpTransport(api, Timeouts(connect=1.0, total=2.0)).request("GET", "/x")
        assert err.value.status == 0 and "GET /x" in err.value.message
    finally:
        await api.close()


async def test_closing_the_api_client_closes_the_pool() -> None:
    async with ScriptedServer(routes()) as server:
        async with client(server) as (http, _):
            assert (await http.request("GET", "/ok")).status == 200
            assert server.open_now == 1
        await server.closed.wait()
        with pytest.raises(ApiError) as err:
            await http.request("GET", "/ok")
        assert err.value.status == 0 and "closed" in err.value.message


async def test_the_request_carries_the_fixed_headers_body_and_encoded_query() -> None:
    async with ScriptedServer(routes()) as server, client(server) as (http, _):
        resp = await http.request(
            "PATCH",
            "/api/v1/namespaces/a/pods/p/status",
            query={"labelSelector": "app=x,tier!=db", "limit": "5"},
            body=b'{"status":{}}',
            content_type="application/strategic-merge-patch+json",
        )
        seen: dict[str, Any] = json.loads(resp.body)
        target = urlsplit(seen["target"])
        assert target.path == "/api/v1/namespaces/a/pods/p/status"
        assert parse_qs(target.query) == {"labelSelector": ["app=x,tier!=db"], "limit": ["5"]}
        headers = seen["headers"]
        assert headers["host"] == urlsplit(server.url).netloc
        assert headers["user-agent"] == "troupe-scheduler"
        assert headers["accept"] == "application/json"
        assert headers["content-type"] == "application/strategic-merge-patch+json"
        assert server.requests[-1].body == b'{"status":{}}'


async def test_the_token_hook_runs_for_every_request() -> None:
    async with ScriptedServer(routes()) as server, client(server) as (http, api):
        cfg = api.configuration
        tokens = iter(["first", "second"])

        def rotate(config: Any) -> None:
            config.api_key["BearerToken"] = next(tokens)

        cfg.api_key["BearerToken"] = "initial"
        cfg.api_key_prefix["BearerToken"] = "Bearer"
        cfg.refresh_api_key_hook = rotate
        await http.request("GET", "/a")
        await http.request("GET", "/b")
        assert [r.headers["authorization"] for r in server.requests] == [
            "Bearer first",
            "Bearer second",
        ]


async def test_every_request_is_observed_with_its_code_or_no_reply() -> None:
    seen: list[tuple[str, str, str]] = []
    async with ScriptedServer(routes()) as server:
        api = await connect(None, server.url, False)
        observe_requests(api, lambda method, host, code, s: seen.append((method, host, code)))
        try:
            http = HttpTransport(api)
            await http.request("POST", "/retry", body=b"{}")
            with pytest.raises(ApiError):
                await http.request("DELETE", "/drop")
        finally:
            await api.close()
        host = urlsplit(server.url).netloc
        assert seen == [("POST", host, "429"), ("DELETE", host, NO_REPLY)]


async def test_with_a_proxy_requests_go_through_aiohttp_to_the_proxy() -> None:
    async with ScriptedServer(routes()) as proxy:
        api = await connect(None, "http://kube.invalid:6443", False)
        api.rest_client.proxy = proxy.url
        try:
            http = HttpTransport(api)
            assert pool_for(api) is None
            assert (await http.request("GET", "/version")).status == 200
        finally:
            await api.close()
        assert proxy.requests[-1].target == "http://kube.invalid:6443/version"


@pytest.mark.parametrize(
    "token",
    [
        pytest.param("abc\r\nX-Injected: 1", id="a line break"),
        pytest.param("abc\u00e9", id="a non-ASCII character"),
    ],
)
async def test_a_token_that_is_not_a_valid_header_is_refused_before_sending(token: str) -> None:
    async with ScriptedServer(routes()) as server, client(server) as (http, api):
        api.configuration.api_key["BearerToken"] = token
        with pytest.raises(ApiError) as err:
            await http.request("GET", "/ok")
        assert err.value.status == 0 and "not a valid header" in err.value.message
        assert server.requests == []


async def test_a_request_that_times_out_waiting_for_a_connection_gives_back_its_turn() -> None:
    arrived = asyncio.Event()
    gate = asyncio.Event()

    async def hold(req: Request, w: asyncio.StreamWriter) -> bool:
        arrived.set()
        await gate.wait()
        w.write(reply())
        await w.drain()
        return True

    async with (
        ScriptedServer(routes(**{"/hold": hold})) as server,
        client(server, limit=1) as (http, _),
    ):
        holding = asyncio.create_task(http.request("GET", "/hold"))
        await arrived.wait()
        with pytest.raises(ApiError) as err:
            await http.request("GET", "/ok", timeout=0.05)
        assert err.value.status == 0 and "timed out" in err.value.message
        queued = asyncio.create_task(http.request("GET", "/ok"))
        gate.set()
        assert (await holding).status == 200
        assert (await queued).status == 200
        assert [r.target for r in server.requests] == ["/hold", "/ok"]
        assert server.connections == 1


def get(path: str) -> bytes:
    return encode_request("GET", path, b"Host: test\r\n", None, "")


@pytest.mark.parametrize(
    ("idle_timeout", "connections"),
    [
        pytest.param(15.0, [1, 1, 1], id="an idle connection is reused"),
        pytest.param(0.0, [1, 2, 3], id="an expired idle connection is closed, not reused"),
    ],
)
async def test_idle_connections_are_reused_until_they_expire(
    idle_timeout: float, connections: list[int]
) -> None:
    async with ScriptedServer(routes()) as server:
        port = urlsplit(server.url).port
        assert port is not None
        pool = Http1Pool("127.0.0.1", port, limit=4, idle_timeout=idle_timeout)
        for _ in connections:
            reply = await pool.request(get("/ok"), connect_timeout=1.0, timeout=2.0)
            assert reply.status == 200
        await pool.close()
        assert [r.connection for r in server.requests] == connections


async def test_the_connection_used_last_is_reused_first() -> None:
    arrived = {b"a": asyncio.Event(), b"b": asyncio.Event()}
    go = {b"a": asyncio.Event(), b"b": asyncio.Event()}

    async def hold(req: Request, w: asyncio.StreamWriter) -> bool:
        arrived[req.body].set()
        await go[req.body].wait()
        w.write(reply())
        await w.drain()
        return True

    async with (
        ScriptedServer(routes(**{"/hold": hold})) as server,
        client(server) as (http, _),
    ):
        a = asyncio.create_task(http.request("POST", "/hold", body=b"a"))
        await arrived[b"a"].wait()
        b = asyncio.create_task(http.request("POST", "/hold", body=b"b"))
        await arrived[b"b"].wait()
        go[b"a"].set()
        await a
        go[b"b"].set()
        await b
        await http.request("GET", "/next")
        by_target = {(r.target, r.body): r.connection for r in server.requests}
        assert by_target[("/next", b"")] == by_target[("/hold", b"b")] == 2
