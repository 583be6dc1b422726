"""A metrics port nobody can starve: stalled connections are closed, the probes are
answered at the connection limit, and the file limit is raised and respected.

Timeouts here are small and every check waits for an outcome (a connection closed,
a status answered), never for a duration."""

from __future__ import annotations

import asyncio
import resource

from troupe.kube.http_guard import (
    RESERVED_SHARE,
    ServingLimits,
    connection_limit,
    raise_open_file_limit,
)

from tests.integration.conftest import eventually
from tests.kube.health_clients import (
    WAIT,
    Stalled,
    exchange,
    get,
    read_to_end,
    serving,
    status_of,
)

SHORT = ServingLimits(header_timeout=0.2, idle_timeout=0.3)
PATIENT = ServingLimits(header_timeout=60.0, idle_timeout=60.0, max_connections=8)


async def test_a_connection_that_never_finishes_its_request_head_is_closed() -> None:
    async with serving(limits=SHORT) as server:
        stalled = await Stalled.open(server.port)
        try:
            assert await stalled.closed_by_server()
        finally:
            stalled.close()
        assert server.guard.timed_out == 1
        assert status_of(await exchange(server.port, get("/healthz"))) == 200


async def test_a_head_sent_a_byte_at_a_time_is_closed_though_bytes_keep_coming() -> None:
    async with serving(limits=SHORT) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        trickle = b"GET /healthz HTTP/1.1\r\nX-Padding: " + b"a" * 10_000

        async def send_slowly() -> None:
            for byte in trickle:
                if writer.is_closing():
                    return
                writer.write(bytes([byte]))
                await asyncio.sleep(0.01)

        sender = asyncio.ensure_future(send_slowly())
        try:
            assert await asyncio.wait_for(read_to_end(reader), WAIT) == b""
            # Closed while bytes were still coming: not an inactivity timeout.
            assert not sender.done()
        finally:
            sender.cancel()
            writer.close()
        assert server.guard.timed_out == 1


async def test_an_idle_kept_alive_connection_is_closed() -> None:
    async with serving(limits=SHORT) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(b"GET /livez HTTP/1.1\r\nHost: troupe\r\n\r\n")
            head = await asyncio.wait_for(reader.readuntil(b"ok"), WAIT)
            assert status_of(head) == 200
            # Kept alive, then nothing: the server closes it.
            assert await asyncio.wait_for(read_to_end(reader), WAIT) == b""
        finally:
            writer.close()


async def test_requests_on_one_kept_alive_connection_each_get_their_answer() -> None:
    """The header timeout counts from each request's first byte, so a connection
    used again and again within it is never cut."""
    async with serving(limits=ServingLimits(header_timeout=0.5, idle_timeout=5)) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            for _ in range(5):
                writer.write(b"GET /readyz HTTP/1.1\r\nHost: troupe\r\n\r\n")
                head = await asyncio.wait_for(reader.readuntil(b"ok"), WAIT)
                assert status_of(head) == 200
        finally:
            writer.close()
        assert server.guard.timed_out == 0


async def test_probes_are_answered_while_stalled_connections_fill_the_limit() -> None:
    async with serving(limits=PATIENT) as server:
        limit = server.guard.limit
        assert limit == 8
        stalled = [await Stalled.open(server.port) for _ in range(limit)]
        await eventually(lambda: len(server.guard) == limit, what="every stalled connection held")
        try:
            for path in ("/healthz", "/livez", "/readyz", "/metrics") * 5:
                assert status_of(await exchange(server.port, get(path))) == 200, path
                assert len(server.guard) <= limit
            # The first probe took the place of the oldest stalled connection.
            assert server.guard.evicted >= 1
            assert await stalled[0].closed_by_server()
        finally:
            for s in stalled:
                s.close()


async def test_the_server_never_holds_more_connections_than_its_limit() -> None:
    async with serving(limits=PATIENT) as server:
        stalled = []
        try:
            for _ in range(5 * server.guard.limit):
                stalled.append(await Stalled.open(server.port))
                await eventually(lambda: server.guard.accepted == len(stalled))
                assert len(server.guard) <= server.guard.limit
            assert server.guard.evicted == 4 * server.guard.limit
            assert status_of(await exchange(server.port, get("/healthz"))) == 200
        finally:
            for s in stalled:
                s.close()


async def test_probes_are_answered_while_every_connection_waits_in_a_request() -> None:
    """Two explain requests hang in their authentication and fill a limit of two:
    the probe still gets in, in place of the older one."""
    release = asyncio.Event()
    entered: list[str] = []

    class Stuck:
        mode = "token"

        async def check(self, authorization: str, verb: str, path: str) -> None:
            entered.append(path)
            await release.wait()

    limits = ServingLimits(header_timeout=60, idle_timeout=60, max_connections=2)
    async with serving(limits=limits, explain=lambda *a: None, debug_auth=Stuck()) as server:
        query = "/debug/troupe/explain?kind=pod&namespace=default&name=p"
        hung = [asyncio.ensure_future(exchange(server.port, get(query))) for _ in range(2)]
        try:
            await eventually(lambda: len(entered) == 2, what="both requests in their handler")
            assert status_of(await exchange(server.port, get("/healthz"))) == 200
            assert server.guard.evicted == 1
        finally:
            release.set()
            await asyncio.gather(*hung, return_exceptions=True)


def test_the_connection_limit_stays_below_the_file_limit() -> None:
    assert connection_limit(256, open_files=1024) == 1024 // RESERVED_SHARE == 256
    assert connection_limit(256, open_files=400) == 100
    assert connection_limit(256, open_files=1_048_576) == 256
    assert connection_limit(256, open_files=2) == 1
    assert connection_limit(256, open_files=resource.RLIM_INFINITY) == 256


def test_the_soft_file_limit_is_raised_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowered = min(soft, 4096) // 2
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
    try:
        assert raise_open_file_limit() == hard
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
