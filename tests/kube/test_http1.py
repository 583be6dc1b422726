"""``HttpTransport`` over the ``http1`` pool, against a scripted raw HTTP server:
framing however the server writes, lost connections and timeouts as status-0
errors, the request's bytes, credentials, observation, the proxy fallback."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from troupe.api.client import ApiError
from troupe.kube.connection import connect
from troupe.kube.http1_pools import pool_for
from troupe.kube.transport import (
    NO_REPLY,
    HttpTransport,
    Timeouts,
    observe_requests,
)

from tests.kube.scripted_http import (
    LARGE,
    Request,
    Route,
    ScriptedServer,
    client,
    routes,
)


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


def malformed(raw: bytes) -> Route:
    async def route(req: Request, w: asyncio.StreamWriter) -> bool:
        w.write(raw)
        await w.drain()
        return True  # the server keeps the connection open: the client must not reuse it

    return route


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(
            b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
            "malformed HTTP response: Invalid status code",
            id="a bad status line",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n",
            "malformed HTTP response: Invalid character in chunk size",
            id="a bad chunk size after a good chunk",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"2\r\n{}\r\n0\r\n\r\n",
            "Transfer-Encoding can't be present with Content-Length",
            id="both a length and chunked",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n{}",
            "unsupported Transfer-Encoding b'gzip'",
            id="a transfer coding other than chunked",
        ),
    ],
)
async def test_a_malformed_reply_is_a_status_0_error_and_its_connection_is_dropped(
    raw: bytes, message: str
) -> None:
    async with (
        ScriptedServer(routes(**{"/malformed": malformed(raw)})) as server,
        client(server) as (http, _),
    ):
        with pytest.raises(ApiError) as err:
            await http.request("GET", "/malformed")
        assert err.value.status == 0
        assert "GET /malformed" in err.value.message and message in err.value.message
        assert (await http.request("GET", "/ok")).status == 200
        assert [r.connection for r in server.requests] == [1, 2]


async def test_retry_after_reaches_the_error() -> None:
    async with ScriptedServer(routes()) as server, client(server) as (http, _):
        err = (await http.request("POST", "/retry", body=b"{}")).error("create")
        assert (err.status, err.retry_after, err.message) == (429, 7.0, "create: slow down")


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


async def test_a_token_that_appears_or_goes_between_requests_is_followed() -> None:
    async with ScriptedServer(routes()) as server, client(server) as (http, api):
        cfg = api.configuration
        await http.request("GET", "/a")  # no credentials: no header to refresh
        cfg.api_key["BearerToken"] = "late"
        cfg.api_key_prefix["BearerToken"] = "Bearer"
        await http.request("GET", "/b")
        del cfg.api_key["BearerToken"]
        await http.request("GET", "/c")
        assert [r.headers.get("authorization") for r in server.requests] == [
            None,
            "Bearer late",
            None,
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
