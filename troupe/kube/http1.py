"""A lean HTTP/1.1 keep-alive connection pool for troupe's non-streaming API requests.

Bindings, events and status patches are small requests sent by the thousand: through
aiohttp's client each costs tens of microseconds of CPU in request objects, header
multidicts, URL parsing and timers. ``HttpTransport`` (``transport.py``) sends them
here instead, as pre-built bytes, over plain asyncio protocols (the default loop or
uvloop), and keeps aiohttp for watches.

- At most ``limit`` connections; one request at a time on each (no pipelining);
  requests beyond the limit wait for a free connection.
- Idle connections are reused last-in first-out (the warmest first) and closed
  after ``idle_timeout``; a connection is discarded on ``Connection: close``, when
  the peer closes, on any error and on anything that is not exactly one
  well-framed response (``http1_parse``, on llhttp).
- Every request has a deadline covering the wait for a connection, the connect
  (bounded again by the connect timeout) and the response: a half-open connection
  never hangs a binding.
- Failures raise ``OSError`` (``ProtocolError`` is one) or ``TimeoutError``; the
  transport maps them to ``ApiError(0, ...)``. A reused connection already seen
  closed before the request is written is skipped, never written to: nothing was
  sent, so the request goes out on another one. Once bytes were written the
  request may have been processed, so a close without a response is an error and
  the caller's retry policy decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from typing import cast

from troupe.kube.http1_parse import ProtocolError, Reply, ResponseParser

# Called right before a request is written, once it holds a connection (after any
# wait for a pool slot or a new connection); raising stops it unsent. The lease
# fence (troupe.kube.fence) sets it for the writes it lets through.
SEND_GUARD: ContextVar[Callable[[], None] | None] = ContextVar("troupe_send_guard", default=None)

__all__ = ["Http1Pool", "ProtocolError", "Reply", "encode_request"]

IDLE_TIMEOUT = 15.0  # seconds an idle connection is kept (aiohttp's keep-alive default)


def encode_request(
    method: str, target: str, head: bytes, body: bytes | None, content_type: str
) -> bytes:
    """Request line, the fixed ``head`` header lines (each ending CRLF), and the body
    with its type and length."""
    if body is None:
        if method in ("POST", "PUT", "PATCH"):
            return b"%s %s HTTP/1.1\r\n%sContent-Length: 0\r\n\r\n" % (
                method.encode(),
                target.encode(),
                head,
            )
        return b"%s %s HTTP/1.1\r\n%s\r\n" % (method.encode(), target.encode(), head)
    return b"%s %s HTTP/1.1\r\n%sContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (
        method.encode(),
        target.encode(),
        head,
        content_type.encode(),
        len(body),
        body,
    )


class _Connection(asyncio.Protocol):
    """One keep-alive connection; ``exchange`` sends a request and awaits its reply."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._parser = ResponseParser()
        self._waiter: asyncio.Future[Reply] | None = None
        self.closed = False  # seen closed, or discarded: never written to again
        self.idle_since = 0.0
        # The request in flight times out at ``_deadline``. One timer per connection,
        # armed for ``_armed_for`` <= ``_deadline`` and kept across requests: when it
        # fires early (a later request extended the deadline) it is armed again, so a
        # request costs no timer of its own (creating and cancelling one was about
        # 2 us, on every binding).
        self._deadline = 0.0
        self._armed_for = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # --- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        sock = self._transport.get_extra_info("socket")
        if sock is not None:
            # Not TCP, or a pseudo-socket without the option: nothing to tune.
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            self.abort()  # bytes nobody asked for: the next response cannot be framed
            return
        try:
            replies = self._parser.feed(data)
        except ProtocolError as exc:
            self._fail(exc)
            return
        if not replies:
            return
        reply = replies[0]
        self._waiter = None
        if len(replies) > 1 or not self._parser.is_idle():
            self.abort()  # more than the one response asked for
        elif not reply.keep_alive:
            self.close()
        waiter.set_result(reply)

    def eof_received(self) -> bool:
        self.closed = True
        return False  # let the transport close; connection_lost ends any response

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._disarm()
        try:
            self._settle(exc)
        finally:
            self._parser.close()

    def _settle(self, exc: Exception | None) -> None:
        """The response in flight when the connection went: whole (read until close)
        or lost."""
        waiter, self._waiter = self._waiter, None
        if waiter is None or waiter.done():
            return
        try:
            reply = self._parser.feed_eof()
        except ProtocolError as error:
            waiter.set_exception(error)
            return
        if reply is not None:
            waiter.set_result(reply)
        else:
            waiter.set_exception(
                ConnectionResetError(f"server closed the connection before the response: {exc}")
                if exc is not None
                else ConnectionResetError("server closed the connection before the response")
            )

    # --- requests ----------------------------------------------------------------------

    def is_usable(self) -> bool:
        """Open, and not seen closing: a request written now reaches a live peer."""
        transport = self._transport
        return not self.closed and transport is not None and not transport.is_closing()

    async def exchange(self, data: bytes, deadline: float, head_only: bool) -> Reply:
        assert self._transport is not None
        waiter: asyncio.Future[Reply] = self._loop.create_future()
        self._waiter = waiter
        self._parser.expect(head_only)
        self._deadline = deadline
        if self._timer is None or self._armed_for > deadline:
            self._arm(deadline)
        try:
            try:
                self._transport.write(data)
            except RuntimeError as exc:  # uvloop: the handle closed under us
                raise ConnectionResetError(str(exc)) from exc
            return await waiter
        except BaseException:
            self.abort()  # timed out, failed or cancelled mid-request: unusable
            raise

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed_for = when
        self._timer = self._loop.call_at(when, self._deadline_reached)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _deadline_reached(self) -> None:
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # idle: the next request arms it again
        if self._armed_for < self._deadline:
            self._arm(self._deadline)  # armed for an earlier request
            return
        self._timed_out()

    def _timed_out(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(TimeoutError())
        self.abort()

    def _fail(self, exc: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.abort()

    def close(self) -> None:
        self.closed = True
        self._disarm()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        self.closed = True
        self._disarm()
        if self._transport is not None:
            self._transport.abort()


class Http1Pool:
    """Keep-alive connections to one server (``host``:``port``, TLS when
    ``ssl_context`` is set). Bound to the event loop of its first request."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        limit: int = 64,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.host, self.port = host, port
        self._ssl = ssl_context
        self._server_hostname = server_hostname if ssl_context is not None else None
        self.limit = max(1, limit)
        self._idle_timeout = idle_timeout
        self._free = self.limit  # requests that may start now
        self._waiters: deque[asyncio.Future[None]] = deque()  # FIFO, for a free slot
        self._idle: deque[_Connection] = deque()
        self._all: set[_Connection] = set()
        self._closed = False
        # The loop of the first request. Asking asyncio for the running loop costs a
        # getpid() system call (its check for a fork), on every request.
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def connections(self) -> int:
        """Open connections (idle or busy)."""
        return sum(1 for c in self._all if not c.closed)

    async def request(
        self, data: bytes, *, connect_timeout: float, timeout: float, head_only: bool = False
    ) -> Reply:
        """Send ``data`` (a whole request) and return the reply. Raises ``OSError``
        (refused, reset, TLS, ``ProtocolError``) or ``TimeoutError``."""
        if self._closed:
            raise ConnectionError("connection pool is closed")
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self._free > 0:
            self._free -= 1
        else:
            await self._wait_for_slot(loop, deadline)
        try:
            conn = self._take_idle(loop.time())
            if conn is None:
                conn = await self._connect(loop, min(deadline, loop.time() + connect_timeout))
            guard = SEND_GUARD.get()
            if guard is not None:
                try:
                    guard()
                except BaseException:
                    self._put_idle(conn, loop.time())
                    raise
            try:
                reply = await conn.exchange(data, deadline, head_only)
            except BaseException:
                self._drop(conn)
                raise
            self._put_idle(conn, loop.time())
            return reply
        finally:
            self._release_slot()

    async def _wait_for_slot(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        # A counter and a FIFO of futures rather than asyncio.Semaphore: the free
        # case, on every request, is then one comparison.
        granted: asyncio.Future[None] = loop.create_future()
        self._waiters.append(granted)
        try:
            async with asyncio.timeout_at(deadline):
                await granted
        except BaseException:
            if granted.done() and not granted.cancelled():
                self._release_slot()  # handed a slot just as we gave up: pass it on
            elif granted in self._waiters:  # else a release already skipped it
                self._waiters.remove(granted)
            raise

    def _release_slot(self) -> None:
        waiters = self._waiters
        while waiters:
            granted = waiters.popleft()
            if not granted.done():
                granted.set_result(None)  # the slot goes straight to the longest waiter
                return
        self._free += 1

    async def close(self) -> None:
        """Close every connection; requests in flight fail, later ones are refused."""
        self._closed = True
        self._idle.clear()
        conns, self._all = self._all, set()
        for conn in conns:
            conn.abort()
        if conns:
            await asyncio.sleep(0)  # let the transports run connection_lost and free sockets

    def _take_idle(self, now: float) -> _Connection | None:
        idle = self._idle
        while idle:
            conn = idle.pop()
            if conn.is_usable() and now - conn.idle_since < self._idle_timeout:
                return conn
            self._drop(conn)
        return None

    def _put_idle(self, conn: _Connection, now: float) -> None:
        if self._closed or not conn.is_usable():
            self._drop(conn)
            return
        conn.idle_since = now
        idle = self._idle
        idle.append(conn)
        # The coldest connections sit at the left end (LIFO reuse): expire them.
        while idle and now - idle[0].idle_since >= self._idle_timeout:
            self._drop(idle.popleft())

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        self._all.discard(conn)

    async def _connect(self, loop: asyncio.AbstractEventLoop, deadline: float) -> _Connection:
        conn = _Connection(loop)
        try:
            async with asyncio.timeout_at(deadline):
                await loop.create_connection(
                    lambda: conn,
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    server_hostname=self._server_hostname,
                )
        except BaseException:
            conn.abort()
            raise
        self._all.add(conn)
        return conn
