"""A raw asyncio HTTP/1.1 server whose every reply is scripted by the test.

Each request path picks a route that writes whatever bytes the test wants (chunked,
split, truncated, never) and says whether the connection stays open. The server
counts connections, so tests can see reuse, and records every request. ``routes()``
is the standard script; ``client(server)`` an ``HttpTransport`` on it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from kubernetes_asyncio.client import ApiClient
from troupe.kube.connection import connect
from troupe.kube.transport import HttpTransport, Timeouts


@dataclass
class Request:
    connection: int
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


Route = Callable[[Request, asyncio.StreamWriter], Awaitable[bool]]
"""Writes the reply; returns whether to keep the connection open."""


def reply(status: int = 200, body: bytes = b"{}", headers: dict[str, str] | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def answer(status: int = 200, body: bytes = b"{}", headers: dict[str, str] | None = None) -> Route:
    async def route(req: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(status, body, headers))
        await writer.drain()
        return True

    return route


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST instead of a FIN."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@dataclass
class ScriptedServer:
    routes: dict[str, Route]
    ssl_context: ssl.SSLContext | None = None
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    open_now: int = 0
    max_open: int = 0
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)  # set when the test ends
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{port}"

    async def __aenter__(self) -> ScriptedServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.release.set()
        for writer in self._writers:
            writer.transport.abort()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        self.connections += 1
        number = self.connections
        self.open_now += 1
        self.max_open = max(self.max_open, self.open_now)
        try:
            while (req := await self._read(number, reader)) is not None:
                self.requests.append(req)
                route = self.routes.get(req.target.split("?")[0]) or self.routes["*"]
                if not await route(req, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            self.open_now -= 1
            if self.open_now == 0:
                self.closed.set()
            self._writers.discard(writer)
            if not writer.transport.is_closing():
                writer.close()

    async def _read(self, number: int, reader: asyncio.StreamReader) -> Request | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        line, *fields = head.decode("latin-1").split("\r\n")
        method, target, _ = line.split(" ")
        headers = {}
        for f in fields:
            if f:
                name, _, value = f.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        return Request(number, method, target, headers, body)


# --- the standard script, and a client for it -----------------------------------------

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


async def chunked(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    for piece in (b"5\r\nhello\r\n", b"6\r\n, worl\r\n", b"1\r\nd\r\n", b"0\r\n\r\n"):
        await w.drain()
        w.write(piece)
    await w.drain()
    return True


async def split(req: Request, w: asyncio.StreamWriter) -> bool:
    raw = reply(200, b'{"split":"across writes"}')
    for i in range(0, len(raw), 7):
        w.write(raw[i : i + 7])
        await w.drain()
    return True


async def large(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(reply(200, LARGE))
    await w.drain()
    return True


async def large_chunked(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    for i in range(0, len(LARGE), 100_000):
        piece = LARGE[i : i + 100_000]
        w.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        await w.drain()
    w.write(b"0\r\n\r\n")
    return True


async def close(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(reply(200, b"{}", {"Connection": "close"}))
    await w.drain()
    return False


async def until_close(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(b"HTTP/1.1 200 OK\r\n\r\nthe body ends when the connection does")
    await w.drain()
    return False


async def bye(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(reply())  # promises keep-alive, then closes the idle connection anyway
    await w.drain()
    return False


async def drop(req: Request, w: asyncio.StreamWriter) -> bool:
    return False  # reads the request, closes without a byte of reply


async def cut(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{partial")
    await w.drain()
    reset(w)
    return False


async def unasked(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(reply(200, b"{}") + b"HTTP/1.1 200 OK\r\n")  # a second, unasked-for reply
    await w.drain()
    return True


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
