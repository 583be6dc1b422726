"""The ``http1`` pool's connections against a scripted raw HTTP server: reuse (last
used first, until idle expiry), replacement of connections the server closed, the
limit and its FIFO of waiting requests, cancellation, closing with the ApiClient."""

from __future__ import annotations

import asyncio
import gc
from urllib.parse import urlsplit

import pytest
from troupe.api.client import ApiError, WriteFenced
from troupe.api.clock import RealClock
from troupe.kube.fence import FencedTransport, WriteFence
from troupe.kube.http1 import Http1Pool, encode_request
from troupe.kube.http1_parse import ResponseParser
from troupe.kube.http1_pools import pool_for

from tests.kube.scripted_http import (
    Request,
    ScriptedServer,
    client,
    eventually,
    reply,
    routes,
)


async def test_an_idle_connection_the_server_closed_is_replaced_without_an_error() -> None:
    async with ScriptedServer(routes()) as server, client(server) as (http, api):
        assert (await http.request("GET", "/bye")).status == 200
        pool = pool_for(api)
        assert pool is not None
        await eventually(lambda: pool.connections == 0)  # the client has seen the close
        assert (await http.request("POST", "/ok", body=b"{}")).status == 200
        assert [r.connection for r in server.requests] == [1, 2]


async def test_requests_beyond_the_pool_wait_for_a_connection_and_none_is_lost() -> None:
    gate, full = asyncio.Event(), asyncio.Event()
    held = 0

    async def hold(req: Request, w: asyncio.StreamWriter) -> bool:
        nonlocal held
        held += 1
        if held == 3:
            full.set()
        await gate.wait()
        w.write(reply(200, req.body))
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


async def test_closing_the_api_client_closes_the_pool() -> None:
    async with ScriptedServer(routes()) as server:
        async with client(server) as (http, _):
            assert (await http.request("GET", "/ok")).status == 200
            assert server.open_now == 1
        await server.closed.wait()
        with pytest.raises(ApiError) as err:
            await http.request("GET", "/ok")
        assert err.value.status == 0 and "closed" in err.value.message


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


async def test_a_write_that_waited_for_a_connection_is_fenced_if_the_lease_went_stale() -> None:
    # A replica paused while its write waits for a pool connection must not send it
    # on resume: the fence runs again once the write holds a connection.
    gate, first = asyncio.Event(), asyncio.Event()

    async def hold(req: Request, w: asyncio.StreamWriter) -> bool:
        first.set()
        await gate.wait()
        w.write(reply(200, req.body))
        await w.drain()
        return True

    fence = WriteFence(RealClock())
    fence.open(RealClock().now(), 3600.0)
    async with (
        ScriptedServer(routes(**{"/hold": hold})) as server,
        client(server, limit=1) as (http, _),
    ):
        fenced = FencedTransport(http, fence)
        busy = asyncio.create_task(fenced.request("POST", "/hold", body=b"1"))
        await first.wait()
        waiting = asyncio.create_task(fenced.request("POST", "/hold", body=b"2"))
        await asyncio.sleep(0.05)
        assert not waiting.done()  # queued behind the only connection
        fence.close("the lease went stale while it waited")
        gate.set()
        assert (await busy).status == 200
        with pytest.raises(WriteFenced):
            await waiting
        assert [r.body for r in server.requests] == [b"1"]
        assert fenced.fenced == 1


async def test_a_replaced_connection_leaves_no_parser_for_the_collector() -> None:
    """A connection the server closed is freed by reference counting alone: its
    parser and llhttp form no cycle that only a full collection would break (the
    daemon's heap is frozen and young collections are rare)."""

    def parsers() -> int:
        return sum(1 for o in gc.get_objects() if type(o) is ResponseParser)

    async with ScriptedServer(routes()) as server, client(server) as (http, api):
        pool = pool_for(api)
        assert pool is not None
        gc.collect()
        gc.disable()
        try:
            before = parsers()
            for _ in range(5):
                assert (await http.request("GET", "/bye")).status == 200
                await eventually(lambda: pool.connections == 0)
            await asyncio.sleep(0)
            # The pool holds its last connection until the next request drops it.
            assert parsers() <= before + 1
        finally:
            gc.enable()


async def test_each_request_on_a_kept_connection_times_out_at_its_own_deadline() -> None:
    """One timer per connection serves every request on it: a request with a later
    deadline than the one before is not cut short by the earlier deadline, and one
    with an earlier deadline is not let run to the later one."""

    async def late(req: Request, w: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.4)
        w.write(reply())
        await w.drain()
        return True

    async with ScriptedServer({**routes(), "/late": late}) as server:
        port = urlsplit(server.url).port
        assert port is not None
        pool = Http1Pool("127.0.0.1", port, limit=1)
        loop = asyncio.get_running_loop()
        try:
            # Armed for 0.2 s by the first request; the second may take 2 s.
            assert (await pool.request(get("/ok"), connect_timeout=1.0, timeout=0.2)).status == 200
            reply_late = await pool.request(get("/late"), connect_timeout=1.0, timeout=2.0)
            assert reply_late.status == 200
            assert [r.connection for r in server.requests] == [1, 1]
            # Now armed for 2 s: a request allowed 0.15 s must fail at 0.15 s.
            start = loop.time()
            with pytest.raises(TimeoutError):
                await pool.request(get("/late"), connect_timeout=1.0, timeout=0.15)
            assert loop.time() - start < 0.35
        finally:
            await pool.close()
