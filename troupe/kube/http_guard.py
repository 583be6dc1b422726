"""Connection limits and timeouts for the scheduler's HTTP endpoints (``HealthServer``).

aiohttp's server waits for a request head as long as its keep-alive timeout allows and
accepts connections until the process runs out of file descriptors. ``ConnectionGuard``
wraps each connection's aiohttp ``RequestHandler`` (an asyncio protocol; the guard only
forwards the protocol's calls and watches them) and adds what Go's ``http.Server``
offers kube-scheduler's port (``k8s.io/apiserver`` ``secure_serving.go``):

- **Header timeout** (Go's ``ReadHeaderTimeout``): a connection must send a whole
  request head within ``header_timeout`` of being accepted, and within
  ``header_timeout`` of the first byte of each later request; otherwise it is
  aborted. Nothing that legitimately reaches this port (Prometheus, the kubelet's
  probes, ``troupe explain``) sends a request slowly.
- **Idle timeout** (Go's ``IdleTimeout``): aiohttp's keep-alive timeout, which
  ``HealthServer`` sets to ``idle_timeout``.
- **A connection limit**: at most ``limit`` connections. A connection accepted at the
  limit takes the place of the oldest one still waiting for its request head, else of
  the oldest idle kept-alive one, else of the oldest of all. A flood of connections
  that never send a request can therefore never lock a probe out, and the process
  never holds more than ``limit`` + 1 of them open: ``connection_limit`` keeps
  ``limit`` below the file limit, which ``raise_open_file_limit`` raises to its hard
  limit at start, as Go's runtime does since Go 1.19 (``os`` package, ``rlimit.go``).

Closed connections (header timeouts, evictions) are reported through ``on_close`` for
the rate-limited log of ``troupe.kube.serving_log``.
"""

from __future__ import annotations

import asyncio
import enum
import resource
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, cast

from aiohttp import web

RESERVED_SHARE: Final = 4
"""``connection_limit`` lets the endpoints use at most a quarter of the file limit;
the rest is for the API connections, watches and files."""


@dataclass(frozen=True, slots=True)
class ServingLimits:
    """What one client may hold of the endpoints (docs/operations.md, "The metrics port")."""

    header_timeout: float = 10.0
    idle_timeout: float = 90.0
    max_connections: int = 256
    metrics_max_age: float = 1.0
    """``/metrics`` is rendered at most once per this many seconds (``CachedMetrics``)."""
    report_interval: float = 60.0
    """Malformed requests and closed connections are logged once per this many seconds."""


def raise_open_file_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (as Go's runtime does at
    start); the soft limit now. A refusal leaves the limit as it was."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            return soft
    return hard


def connection_limit(max_connections: int, open_files: int | None = None) -> int:
    """``max_connections``, at most a quarter of the soft file limit (``open_files``;
    the process's by default), at least 1."""
    if open_files is None:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if open_files == resource.RLIM_INFINITY or open_files < 0:
        return max(1, max_connections)
    return max(1, min(max_connections, open_files // RESERVED_SHARE))


class ConnState(enum.Enum):
    HEAD = "waiting for a request head"
    REQUEST = "in a request"
    IDLE = "idle"


class GuardedConnection(asyncio.Protocol):
    """One accepted connection: forwards every protocol call to aiohttp's handler and
    tracks where the connection is (``ConnState``)."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self._guard = guard
        self._inner = inner
        self.transport: asyncio.Transport | None = None
        self.state = ConnState.HEAD
        self._timer: asyncio.TimerHandle | None = None
        self._bytes_during_request = False

    # --- the asyncio protocol, forwarded --------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; aiohttp casts too.
        self.transport = cast(asyncio.Transport, transport)
        self._guard.admit(self)
        self._inner.connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        if self.state is ConnState.IDLE:
            self._await_head()
        elif self.state is ConnState.REQUEST:
            self._bytes_during_request = True
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        self._guard.forget(self)
        self._inner.connection_lost(exc)

    # --- requests, as the guard's middleware sees them -------------------------------

    def request_started(self) -> None:
        self._cancel_timer()
        self.state = ConnState.REQUEST
        self._bytes_during_request = False

    def request_finished(self) -> None:
        self.state = ConnState.IDLE
        if self._bytes_during_request:
            # Part of the next request came in meanwhile: its head is due.
            self._await_head()

    # --- closing ---------------------------------------------------------------------

    def abort(self) -> None:
        """Close at once, dropping anything unsent (a peer that does not read must not
        keep the descriptor)."""
        self._cancel_timer()
        if self.transport is not None:
            self.transport.abort()

    def _await_head(self) -> None:
        self._cancel_timer()
        self.state = ConnState.HEAD
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._guard.header_timeout, self._head_timed_out)

    def _head_timed_out(self) -> None:
        self._timer = None
        self._guard.closed("header timeout", self)
        self.abort()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def peer(self) -> str:
        if self.transport is None:
            return ""
        peer = self.transport.get_extra_info("peername")
        return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else ""


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ConnectionGuard:
    """The live connections of one listener, oldest first (see the module doc)."""

    def __init__(
        self,
        *,
        limit: int,
        header_timeout: float,
        on_close: Callable[[str, str], None] | None = None,
    ) -> None:
        """``on_close(why, peer)`` hears of every connection the guard closes."""
        self.limit = max(1, limit)
        self.header_timeout = header_timeout
        self._on_close = on_close
        self._open: dict[GuardedConnection, None] = {}  # in accept order
        self._by_transport: dict[asyncio.BaseTransport, GuardedConnection] = {}
        self.accepted = 0
        self.evicted = 0
        self.timed_out = 0

    def __len__(self) -> int:
        return len(self._open)

    def factory(self, inner: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        """A protocol factory for ``loop.create_server`` around aiohttp's ``inner``."""
        return lambda: GuardedConnection(self, inner())

    def admit(self, conn: GuardedConnection) -> None:
        if len(self._open) >= self.limit:
            victim = self._victim()
            self.forget(victim)
            self.closed("connection limit reached", victim)
            victim.abort()
        self.accepted += 1
        self._open[conn] = None
        if conn.transport is not None:
            self._by_transport[conn.transport] = conn

    def _victim(self) -> GuardedConnection:
        for state in (ConnState.HEAD, ConnState.IDLE):
            for conn in self._open:
                if conn.state is state:
                    return conn
        return next(iter(self._open))

    def forget(self, conn: GuardedConnection) -> None:
        self._open.pop(conn, None)
        if conn.transport is not None and self._by_transport.get(conn.transport) is conn:
            del self._by_transport[conn.transport]

    def closed(self, why: str, conn: GuardedConnection) -> None:
        if why == "header timeout":
            self.timed_out += 1
        else:
            self.evicted += 1
        if self._on_close is not None:
            self._on_close(why, conn.peer())

    def abort_all(self) -> None:
        for conn in list(self._open):
            self.forget(conn)
            conn.abort()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Tells the connection a request head arrived and when its handler is done."""
        transport = request.transport
        conn = self._by_transport.get(transport) if transport is not None else None
        if conn is None:
            return await handler(request)
        conn.request_started()
        try:
            return await handler(request)
        finally:
            conn.request_finished()
