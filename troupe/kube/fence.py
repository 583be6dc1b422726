"""Writes sent only while this replica holds the lease (leader-election fencing).

``FencedTransport`` wraps the scheduler's transport: before sending any request but
a read (bindings, evictions, deletions, status patches, events), it asks
``may_write`` (``LeaderElector.may_write``). When the answer is no, nothing is sent
and ``WriteFenced`` is raised: the binding or write fails like any refused write,
and the elector ends leadership, so the process stops and exits.

The check runs right before the request is handed to the connection pool, after any
wait for the client's rate limiter, and again in the HTTP/1.1 pool once the request
holds a connection, right before its bytes are written (``http1.SEND_GUARD``), so a
wait for a free pool connection or for a new one to open is covered too: a replica
paused for a while (SIGSTOP, a VM pause, a long GC pause) finds its lease stale the
moment it resumes, before it sends what it had queued. With a proxy configured
requests go through aiohttp, where only the first check runs. docs/operations.md
("Leader election and fencing") states what this guarantees and what the API
server's UID precondition adds.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from troupe.api.client import WriteFenced
from troupe.kube.http1 import SEND_GUARD
from troupe.kube.transport import JSON, Query, Response, Transport, WatchStream

__all__ = ["FencedTransport", "WriteFenced"]

READS = frozenset({"GET", "HEAD"})


class FencedTransport:
    def __init__(self, inner: Transport, may_write: Callable[[], bool]) -> None:
        self._inner = inner
        self._may_write = may_write
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

        def guard() -> None:
            if not self._may_write():
                self.fenced += 1
                raise WriteFenced(f"{method} {path} not sent: this replica does not hold the lease")

        guard()
        token = SEND_GUARD.set(guard)
        try:
            return await self._inner.request(
                method, path, query=query, body=body, content_type=content_type, timeout=timeout
            )
        finally:
            SEND_GUARD.reset(token)

    def stream(
        self, path: str, *, query: Query, timeout: float
    ) -> AbstractAsyncContextManager[WatchStream]:
        return self._inner.stream(path, query=query, timeout=timeout)
