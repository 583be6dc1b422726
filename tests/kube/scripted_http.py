"""A raw asyncio HTTP/1.1 server whose every reply is scripted by the test.

Each request path picks a route that writes whatever bytes the test wants (chunked,
split, truncated, never) and says whether the connection stays open. The server
counts connections, so tests can see reuse, and records every request.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


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
