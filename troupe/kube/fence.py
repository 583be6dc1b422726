"""Writes sent only while this replica holds the lease (leader-election fencing).

``WriteFence`` says whether a write may be sent now. The elector
(``troupe.kube.leader.LeaderElector``) opens it when it starts leading, moves its end
to ``renew_deadline`` after each renewal it *sent* (``renewed``), pulls the end in when
the Lease shows a shorter ``leaseDurationSeconds`` (``shorten``), and closes it, once
and for good, the moment it observes the Lease deleted, held by another replica or
unreadable, or leadership ends. A check past the end closes it too. Each closure is
logged once at ``error`` with its reason and the writes that were on the wire then.

``FencedTransport`` wraps the scheduler's transport: before sending any request but
a read (bindings, evictions, deletions, status patches, events), it asks the fence.
When the answer is no, nothing is sent and ``WriteFenced`` is raised: the binding or
write fails like any refused write, and the elector ends leadership, so the process
stops and exits.

The check runs right before the request is handed to the connection pool, after any
wait for the client's rate limiter, and again in the HTTP/1.1 pool once the request
holds a connection, right before its bytes are written (``http1.SEND_GUARD``), so a
wait for a free pool connection or for a new one to open is covered too: a replica
paused for a while (SIGSTOP, a VM pause, a long GC pause) finds its lease stale the
moment it resumes, before it sends what it had queued. With a proxy configured
requests go through aiohttp, where only the first check runs.

What a closure cannot stop is a write already let through: ``on the wire`` is every
write that passed the last check and has not been answered. The closure's log line
names them (``writesOnTheWire``) with the moment writes stopped being allowed on this
host's monotonic clock (``monotonicTime``), so a write the API server applied after
the Lease moved can be told apart: on the wire (or answered) before that moment, or
not. docs/operations.md ("Leader election and fencing") states what this guarantees.
"""

from __future__ import annotations

import asyncio
import itertools
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, NoReturn

import structlog

from troupe.api.client import WriteFenced
from troupe.api.clock import Clock
from troupe.kube.http1 import SEND_GUARD
from troupe.kube.transport import JSON, Query, Response, Transport, WatchStream

__all__ = ["FenceClosure", "FencedTransport", "WriteFence", "WriteFenced"]

log = structlog.get_logger("troupe.leader")

READS = frozenset({"GET", "HEAD"})
NOT_RENEWED = "lease not renewed within the renew deadline"
DURATION_RAN_OUT = "lease duration no longer covers the last renewal"


@dataclass(frozen=True, slots=True)
class FenceClosure:
    """Why and when the fence closed, and what was on the wire then."""

    reason: str
    at: float  # monotonic: from this moment on no write was allowed
    on_the_wire: tuple[str, ...]  # "METHOD path" of each write let through before ``at``


class WriteFence:
    """Open from ``open`` until its end passes or ``close``; see the module doc."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._open = False
        self._until = float("-inf")
        self._renewed_at = float("-inf")  # when the renewal the end counts from was sent
        self._floor = float("-inf")  # a closure is never dated before this moment
        self._lapse: tuple[str, dict[str, Any]] = (NOT_RENEWED, {})
        self._context: dict[str, Any] = {}
        self._wire: dict[int, tuple[str, float]] = {}
        self._tokens = itertools.count()
        self.closure: FenceClosure | None = None
        self.closed = asyncio.Event()

    # --- the elector's side --------------------------------------------------------------

    def open(self, sent: float, seconds: float, **context: Any) -> None:
        """A new term: writes are allowed until ``seconds`` after ``sent`` (the
        acquiring write's send time) unless renewed. ``context`` goes on every
        closure line (the lease's name)."""
        self._open = True
        self.closure = None
        self.closed.clear()
        self._context = context
        self.renewed(sent, seconds)

    def renewed(self, sent: float, seconds: float) -> None:
        """A renewal sent at ``sent`` succeeded: writes are allowed until ``seconds``
        after it."""
        if not self._open:
            return
        self._renewed_at = sent
        self._until = sent + seconds
        self._floor = float("-inf")
        self._lapse = (NOT_RENEWED, {"renewDeadline": seconds})

    def shorten(self, lease_duration_seconds: int, **fields: Any) -> None:
        """The Lease, still ours, now says ``leaseDurationSeconds``: the others may
        count it from our last renewal on, so no write after that many seconds. Closes
        the fence at once when they have passed (logged with ``fields``)."""
        if not self._open:
            return
        until = self._renewed_at + lease_duration_seconds
        if until < self._until:
            self._until = until
            # Learned now: writes sent before this moment were sent in good faith.
            self._floor = self._clock.now()
            fields["leaseDurationSeconds"] = lease_duration_seconds
            self._lapse = (DURATION_RAN_OUT, fields)
        self.may_write()

    def close(self, reason: str, **fields: Any) -> None:
        """No write from now on (or from the end of the proof, if that came first).
        Logged once at ``error`` with ``fields``; ``quiet`` closures (leadership ended
        on request) at ``info``."""
        if not self._open:
            return
        quiet = bool(fields.pop("quiet", False))
        now = self._clock.now()
        at = max(self._floor, min(now, self._until))
        wire = tuple(sorted(what for what, started in self._wire.values() if started <= at))
        self._open = False
        self.closure = FenceClosure(reason, at, wire)
        self.closed.set()
        emit = log.info if quiet else log.error
        emit(
            reason,
            **self._context,
            **fields,
            writesOnTheWire=list(wire),
            monotonicTime=at,
        )

    # --- the writers' side ---------------------------------------------------------------

    def may_write(self) -> bool:
        """Whether a write may be sent now; the first check past the end closes."""
        if not self._open:
            return False
        now = self._clock.now()
        if now < self._until:
            return True
        reason, fields = self._lapse
        self.close(reason, **fields, sinceRenewal=round(now - self._renewed_at, 3))
        return False

    def let_through(self, what: str) -> int | None:
        """A write passes the first check: its token, or None when it may not go."""
        if not self.may_write():
            return None
        token = next(self._tokens)
        self._wire[token] = (what, self._clock.now())
        return token

    def sending(self, token: int) -> bool:
        """The last check, right before the write's bytes go out: whether it may."""
        entry = self._wire.get(token)
        if entry is None or not self.may_write():
            self._wire.pop(token, None)
            return False
        self._wire[token] = (entry[0], self._clock.now())
        return True

    def answered(self, token: int) -> None:
        """The write is done (answered, failed or refused)."""
        self._wire.pop(token, None)

    @property
    def on_the_wire(self) -> int:
        return len(self._wire)


class FencedTransport:
    def __init__(self, inner: Transport, fence: WriteFence) -> None:
        self._inner = inner
        self._fence = fence
        self.fenced = 0

    @property
    def base_url(self) -> str:
        return self._inner.base_url

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: bytes | None = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> Response:
        if method.upper() in READS:
            return await self._inner.request(
                method, path, query=query, body=body, content_type=content_type, timeout=timeout
            )
        fence = self._fence
        let = fence.let_through(f"{method} {path}")
        if let is None:
            self._refuse(method, path)
        token: int = let

        def guard() -> None:
            if not fence.sending(token):
                self._refuse(method, path)

        reset = SEND_GUARD.set(guard)
        try:
            return await self._inner.request(
                method, path, query=query, body=body, content_type=content_type, timeout=timeout
            )
        finally:
            SEND_GUARD.reset(reset)
            fence.answered(token)

    def _refuse(self, method: str, path: str) -> NoReturn:
        self.fenced += 1
        raise WriteFenced(f"{method} {path} not sent: this replica does not hold the lease")

    def stream(
        self, path: str, *, query: Query, timeout: float
    ) -> AbstractAsyncContextManager[WatchStream]:
        return self._inner.stream(path, query=query, timeout=timeout)
