"""Writes sent only while this replica holds the lease (leader-election fencing).

``FencedTransport`` wraps the scheduler's transport: before sending any request but
a read (bindings, evictions, deletions, status patches, events), it asks
``may_write`` (``LeaderElector.may_write``). When the answer is no, nothing is sent
and ``WriteFenced`` is raised: the binding or write fails like any refused write,
and the elector ends leadership, so the process stops and exits.

The check runs right before the request is handed to the connection pool, after any
wait for the client's rate limiter: a replica paused for a while (SIGSTOP, a VM
pause, a long GC pause) finds its lease stale the moment it resumes, before it sends
what it had queued. A request that then waits for a free pool connection, or for a
new one to open, is not checked again before it is written. docs/operations.md
("Leader election and fencing") states what this guarantees and what the API
server's UID precondition adds.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from troupe.api.client import WriteFenced
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
        if method.upper() not in READS and not self._may_write():
            self.fenced += 1
            raise WriteFenced(f"{method} {path} not sent: this replica does not hold the lease")
        return await self._inner.request(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )

    def stream(
        self, path: str, *, query: Query, timeout: float
    ) -> AbstractAsyncContextManager[WatchStream]:
        return self._inner.stream(path, query=query, timeout=timeout)
