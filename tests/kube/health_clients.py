"""Raw clients of the scheduler's HTTP endpoints, for the tests of what hostile or
broken clients get from ``HealthServer``: requests written byte for byte, stalled
connections, and a frozen clock for the cache and the log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from prometheus_client import CollectorRegistry
from troupe.kube.health import HealthServer
from troupe.kube.http_guard import ServingLimits

# A guard against a hang, never a measurement: every wait below ends on an outcome.
WAIT = 15.0


class Frozen:
    """A clock that moves only when told (``HealthServer``'s ``clock``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def serving(
    registry: CollectorRegistry | None = None,
    *,
    limits: ServingLimits | None = None,
    clock: Callable[[], float] | None = None,
    **kwargs: Any,
) -> AsyncIterator[HealthServer]:
    extra: dict[str, Any] = {"clock": clock} if clock is not None else {}
    if limits is not None:
        extra["limits"] = limits
    server = HealthServer(
        "127.0.0.1",
        0,
        registry if registry is not None else CollectorRegistry(),
        live=lambda: True,
        ready=lambda: True,
        **extra,
        **kwargs,
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def exchange(port: int, raw: bytes) -> bytes:
    """Send ``raw`` and read until the server closes (or resets) the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        return await asyncio.wait_for(read_to_end(reader), WAIT)
    finally:
        writer.close()


async def read_to_end(reader: asyncio.StreamReader) -> bytes:
    chunks = []
    try:
        while chunk := await reader.read(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(chunks)


def get(path: str, *headers: str, version: str = "HTTP/1.1") -> bytes:
    lines = [f"GET {path} {version}", "Host: troupe", "Connection: close", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def status_of(reply: bytes) -> int:
    """The status code of the first response in ``reply`` (0: none)."""
    first = reply.split(b"\r\n", 1)[0].split()
    return int(first[1]) if len(first) >= 2 and first[1].isdigit() else 0


class Stalled:
    """A connection that sent part of a request head and stops there."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(
        cls, port: int, sent: bytes = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    ) -> Stalled:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(sent)
        await writer.drain()
        return cls(reader, writer)

    async def closed_by_server(self) -> bool:
        """Wait until the server closes this connection; True once it has (nothing
        was answered)."""
        return await asyncio.wait_for(read_to_end(self.reader), WAIT) == b""

    def close(self) -> None:
        self.writer.close()
