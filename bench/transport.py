"""Client CPU per API request: aiohttp's ClientSession vs troupe's HTTP/1.1 pool.

The embedded API server runs in its own process (``bench.server``) with a pending
pod for every binding to come. In this process, one ``ApiClient`` from ``connect``
serves, in rounds, ``AiohttpTransport`` (the ClientSession path troupe used for
every request) and ``HttpTransport`` (the ``http1`` pool), each round starting with
the other one. Each sends, for its own pods, what the scheduler sends per scheduled
pod (the binding and its ``Scheduled`` event) from ``--concurrency`` workers.
``cpu_us_per_request`` is this process's CPU time (``time.process_time``, split into
user and system) over the round's requests; ``requests_per_second`` is their rate,
bounded by the server's single core. The figures of each path's best round are
reported (other load on the machine only adds), with the median CPU over all
rounds, and ``ratio`` = best aiohttp CPU ÷ best http1 CPU. The pool's parser is
llhttp's (``httptools``); the bench that compared it with the hand-written parser
it replaced is in commit b12a6c9 (docs/benchmarks.md, "Transport").

``python -m bench transport [--requests 20000] [--concurrency 64] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from resource import RUSAGE_SELF, getrusage

from troupe.kube import connect
from troupe.kube.transport import AiohttpTransport, HttpTransport, Transport

from bench.server import NAMESPACE, ServerProcess

WARMUP = 200  # requests per path before measuring: connections open, caches warm


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--requests", type=int, default=20000, help="per path and round")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per path")
    p.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")


def requests_for(pod: str) -> Iterator[tuple[str, str, bytes]]:
    """The binding and the event the scheduler writes for one scheduled pod."""
    yield (
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}/binding",
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": pod, "namespace": NAMESPACE},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-0"},
            }
        ).encode(),
    )
    yield (
        "POST",
        f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events",
        json.dumps(
            {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": f"{pod}.scheduled", "namespace": NAMESPACE},
                "eventTime": "2024-01-01T00:00:00.000000Z",
                "reportingController": "troupe-scheduler",
                "reportingInstance": "bench",
                "action": "Binding",
                "reason": "Scheduled",
                "regarding": {"kind": "Pod", "name": pod, "namespace": NAMESPACE},
                "note": f"Successfully assigned {NAMESPACE}/{pod} to node-0",
                "type": "Normal",
            }
        ).encode(),
    )


async def send_all(transport: Transport, pods: list[str], concurrency: int) -> dict[str, float]:
    work = iter([r for pod in pods for r in requests_for(pod)])
    failures = 0

    async def worker() -> None:
        nonlocal failures
        for method, path, body in work:
            resp = await transport.request(method, path, body=body)
            failures += not resp.ok

    cpu, wall, usage = time.process_time(), time.perf_counter(), getrusage(RUSAGE_SELF)
    async with asyncio.TaskGroup() as tg:
        for _ in range(concurrency):
            tg.create_task(worker())
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    after = getrusage(RUSAGE_SELF)
    n = 2 * len(pods)
    if failures:
        raise RuntimeError(f"{failures} of {n} requests failed")
    return {
        "cpu_us_per_request": cpu / n * 1e6,
        "user_us_per_request": (after.ru_utime - usage.ru_utime) / n * 1e6,
        "sys_us_per_request": (after.ru_stime - usage.ru_stime) / n * 1e6,
        "requests_per_second": n / wall,
    }


async def measure(args: argparse.Namespace) -> dict[str, object]:
    paths = ("aiohttp", "http1")
    pods_per_round = args.requests // 2
    total = len(paths) * (args.rounds * pods_per_round + WARMUP // 2)
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        argv = ["--nodes", "1", "--pods", str(total)]
        async with ServerProcess(argv, kubeconfig):
            api = await connect(str(kubeconfig), None, False, pool_size=args.concurrency)
            transports: dict[str, Transport] = {
                "aiohttp": AiohttpTransport(api),
                "http1": HttpTransport(api),
            }
            names = iter(f"pod-{i}" for i in range(total))
            for name in paths:
                await send_all(transports[name], [next(names) for _ in range(WARMUP // 2)], 8)
            rounds: dict[str, list[dict[str, float]]] = {name: [] for name in paths}
            try:
                for r in range(args.rounds):
                    for name in paths[r % len(paths) :] + paths[: r % len(paths)]:
                        pods = [next(names) for _ in range(pods_per_round)]
                        rounds[name].append(
                            await send_all(transports[name], pods, args.concurrency)
                        )
            finally:
                await api.close()
    result: dict[str, object] = {
        "benchmark": "transport",
        "loop": args.loop,
        "concurrency": args.concurrency,
        "requests_per_round": 2 * pods_per_round,
        "rounds": args.rounds,
    }
    result.update(summarize(rounds))
    return result


def summarize(rounds: dict[str, list[dict[str, float]]]) -> dict[str, object]:
    """Each path's best round (least CPU per request), its median, and ``ratio`` =
    best aiohttp CPU / best http1 CPU, from the unrounded figures."""
    summary: dict[str, object] = {}
    cpu: dict[str, float] = {}
    for name, figures in rounds.items():
        best = min(figures, key=lambda f: f["cpu_us_per_request"])
        cpu[name] = best["cpu_us_per_request"]
        summary.update({f"{name}_{key}": round(value, 1) for key, value in best.items()})
        median = statistics.median(f["cpu_us_per_request"] for f in figures)
        summary[f"{name}_cpu_us_per_request_median"] = round(median, 1)
    summary["ratio"] = round(cpu["aiohttp"] / cpu["http1"], 2)
    return summary


def run(args: argparse.Namespace) -> int:
    if args.loop == "uvloop":
        import uvloop

        result = uvloop.run(measure(args))
    else:
        result = asyncio.run(measure(args))
    print(json.dumps(result), flush=True)
    return 0
