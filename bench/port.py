"""``python -m bench port``: what hostile clients of the metrics port do to it.

The scheduler's HTTP endpoints (``troupe.kube.health.HealthServer``, on a fresh
scheduler's metrics registry) run in a child process started as ``troupe run``
starts them: the soft ``RLIMIT_NOFILE`` at ``--soft-limit`` (1024, the usual
default), raised to the hard limit where the build does so, JSON logs at ``info``
on stderr. Then, from this process:

1. **Stalled connections**: ``--stalled`` connections (1100) each send part of a
   request head and stop. While they are held, ``--probes`` (60) ``GET /healthz``
   are sent one after the other, each allowed ``--probe-timeout`` seconds (1 s, the
   kubelet's default); then the stalled connections are held ``--hold`` seconds
   more. Reported: ``healthz_ok`` of ``probes``, the child's open descriptors at the
   peak (``child_fds_peak``, from ``/proc``), how many stalled connections the
   server had closed by the end (``stalled_closed``).
2. **Malformed requests**: ``--malformed`` (20000) requests with a header line
   that has no colon, over 16 connections at a time. Reported: the bytes the child logged meanwhile
   (``malformed_log_bytes``), its resident memory before and after
   (``rss_before_mb``, ``rss_after_mb``), and ``/healthz`` afterwards. Each part
   gets a child of its own; ``stalled_log_bytes`` is what the first one logged.

The figures of a build are compared with another build's by running this same file
from a worktree of it (docs/benchmarks.md, "The metrics port under hostile clients").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path

CHILD = """
import asyncio, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(int(sys.argv[1]), hard), hard))
try:  # as troupe run does, where the build does it
    from troupe.kube.http_guard import raise_open_file_limit
    raise_open_file_limit()
except ImportError:
    pass
from troupe.kube.health import HealthServer
from troupe.scheduler.observe.metrics import SchedulerMetrics
from troupe.scheduler.service.logs import configure_logging

async def main():
    configure_logging("info")
    server = HealthServer("127.0.0.1", 0, SchedulerMetrics.for_process().registry,
                          live=lambda: True, ready=lambda: True)
    port = await server.start()
    print(port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop()

asyncio.run(main())
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--soft-limit", type=int, default=1024, help="the child's soft RLIMIT_NOFILE")
    p.add_argument("--stalled", type=int, default=1100, help="connections stalled mid-head")
    p.add_argument("--probes", type=int, default=60, help="GET /healthz while they are held")
    p.add_argument("--probe-timeout", type=float, default=1.0, help="seconds per probe")
    p.add_argument("--hold", type=float, default=15.0, help="seconds to hold them afterwards")
    p.add_argument("--malformed", type=int, default=20000, help="garbage requests to send")


class Child:
    def __init__(self, proc: asyncio.subprocess.Process, port: int) -> None:
        self.proc, self.port = proc, port
        self.log_bytes = 0
        self._drain = asyncio.ensure_future(self._count_stderr())

    async def _count_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(65536):
            self.log_bytes += len(chunk)

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    async def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self._drain.cancel()


async def start_child(soft_limit: int) -> Child:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        str(soft_limit),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    port = int((await asyncio.wait_for(proc.stdout.readline(), 60)).strip())
    return Child(proc, port)


async def probe(port: int, timeout: float) -> bool:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    except (OSError, TimeoutError):
        return False
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: troupe\r\nConnection: close\r\n\r\n")
        reply = await asyncio.wait_for(reader.read(4096), timeout)
        return reply.startswith(b"HTTP/1.1 200")
    except (OSError, TimeoutError):
        return False
    finally:
        writer.close()


async def stall(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    except (OSError, TimeoutError):
        return None
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: troupe\r\nX-Slow: ")
    return reader, writer


async def stalled_run(child: Child, args: argparse.Namespace) -> dict[str, float]:
    held = [c for c in await asyncio.gather(*(stall(child.port) for _ in range(args.stalled))) if c]
    peak = child.fds()
    ok = 0
    for _ in range(args.probes):
        ok += await probe(child.port, args.probe_timeout)
        peak = max(peak, child.fds())
    deadline = time.monotonic() + args.hold
    while time.monotonic() < deadline:
        peak = max(peak, child.fds())
        await asyncio.sleep(0.5)
    closed = sum(r.at_eof() or w.is_closing() for r, w in held)
    for _, writer in held:
        writer.close()
    return {
        "stalled_opened": len(held),
        "healthz_ok": ok,
        "probes": args.probes,
        "child_fds_peak": peak,
        "stalled_closed": closed,
    }


async def malformed_run(child: Child, count: int, probe_timeout: float) -> dict[str, float]:
    before_log, before_rss = child.log_bytes, child.rss_mb()
    sent = 0

    async def sender() -> None:
        nonlocal sent
        while sent < count:
            sent += 1
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", child.port)
                # A header line without a colon: aiohttp's BadHttpMessage. (A bad
                # method on a first request is only a debug line in aiohttp.)
                writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n")
                await reader.read()
                writer.close()
            except OSError:
                pass

    await asyncio.gather(*(sender() for _ in range(16)))
    await asyncio.sleep(1.0)  # the child writes what it logs
    return {
        "malformed_sent": sent,
        "malformed_log_bytes": child.log_bytes - before_log,
        "rss_before_mb": round(before_rss, 1),
        "rss_after_mb": round(child.rss_mb(), 1),
        "healthz_after_malformed": await probe(child.port, probe_timeout),
    }


async def _main(args: argparse.Namespace) -> dict[str, float]:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # this side holds them all
    result: dict[str, float] = {"soft_limit": args.soft_limit}
    # A child for each part, so that one's log and memory do not count in the other's.
    child = await start_child(args.soft_limit)
    try:
        result["child_fds_at_start"] = child.fds()
        result |= await stalled_run(child, args)
        result["stalled_log_bytes"] = child.log_bytes
    finally:
        await child.stop()
    child = await start_child(args.soft_limit)
    try:
        result |= await malformed_run(child, args.malformed, args.probe_timeout)
    finally:
        await child.stop()
    return result


def run(args: argparse.Namespace) -> int:
    result = asyncio.run(_main(args))
    print(
        f"healthz {result['healthz_ok']}/{result['probes']} with {result['stalled_opened']} "
        f"stalled connections (child fds peak {result['child_fds_peak']}); "
        f"{result['malformed_sent']} malformed requests logged "
        f"{result['malformed_log_bytes']} bytes"
    )
    print(json.dumps(result))
    return 0
