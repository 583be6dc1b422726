"""A scripted ``Transport`` for unit tests of the kube client module.

Replies are queued per ``(method, path)``; each may be a ``Response`` or an
``ApiError`` to raise (no reply). Requests are recorded in order. Watches are
queued as ``ScriptedWatch`` values: a status, lines, and what happens after the
lines (end normally, raise, or block until the test releases it).
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from troupe.api.client import ApiError
from troupe.kube.transport import JSON, Query, Response, WatchStream


@dataclass(frozen=True)
class Sent:
    method: str
    path: str
    query: dict[str, str]
    body: bytes | None
    content_type: str

    def json(self) -> Any:
        assert self.body is not None
        return json.loads(self.body)


def status_body(code: int, message: str, reason: str = "") -> bytes:
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    ).encode()


def reply(status: int, body: Any = None, retry_after: str | None = None) -> Response:
    if body is None:
        data = b"{}" if status < 300 else status_body(status, f"failed with {status}")
    elif isinstance(body, bytes):
        data = body
    else:
        data = json.dumps(body).encode()
    return Response(status, data, retry_after)


@dataclass
class ScriptedWatch:
    status: int = 200
    lines: list[bytes] = field(default_factory=list)
    then_raise: ApiError | None = None
    block: asyncio.Event | None = None  # after the lines, wait for this before ending


class _Stream:
    def __init__(self, script: ScriptedWatch) -> None:
        self._s = script

    @property
    def status(self) -> int:
        return self._s.status

    async def body(self) -> bytes:
        return b"".join(self._s.lines)

    async def lines(self) -> AsyncIterator[bytes]:
        for line in self._s.lines:
            await asyncio.sleep(0)
            yield line
        if self._s.block is not None:
            await self._s.block.wait()
        if self._s.then_raise is not None:
            raise self._s.then_raise


class FakeTransport:
    base_url = "http://fake"

    def __init__(self) -> None:
        self.replies: dict[tuple[str, str], deque[Response | ApiError]] = defaultdict(deque)
        self.default: Response = reply(200)
        self.sent: list[Sent] = []
        self.watches: deque[ScriptedWatch] = deque()
        self.watch_queries: list[dict[str, str]] = []
        self.watch_timeouts: list[float] = []

    def script(self, method: str, path: str, *outcomes: Response | ApiError) -> None:
        self.replies[(method, path)].extend(outcomes)

    def calls(self, method: str | None = None, path: str | None = None) -> list[Sent]:
        return [
            s
            for s in self.sent
            if (method is None or s.method == method) and (path is None or s.path == path)
        ]

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
        self.sent.append(Sent(method, path, dict(query or {}), body, content_type))
        await asyncio.sleep(0)
        queue = self.replies.get((method, path))
        outcome = queue.popleft() if queue else self.default
        if isinstance(outcome, ApiError):
            raise outcome
        return outcome

    @asynccontextmanager
    async def stream(
        self, path: str, *, query: Query, timeout: float
    ) -> AsyncIterator[WatchStream]:
        self.watch_queries.append(dict(query))
        self.watch_timeouts.append(timeout)
        await asyncio.sleep(0)
        if not self.watches:
            # Nothing more scripted: behave like an idle watch until cancelled.
            await asyncio.Event().wait()
        yield _Stream(self.watches.popleft())
