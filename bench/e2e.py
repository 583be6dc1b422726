"""SchedulingBasic end to end over HTTP, against the bind-only limit, in one run.

1. Start the embedded API server in its own process with 5000 nodes, 1000 bound
   pods and 10000 pending pods; run the troupe daemon (informers, scheduler,
   binding through the kube client) until every pending pod is bound.
2. Start a fresh server with the same objects and post the same number of bindings
   with the same client and concurrency, with no scheduling at all.

``ratio`` = troupe pods/s ÷ bind-only pods/s. ``p99_e2e_ms`` is the 99th percentile
of a pod's attempt from pop to the API server accepting its binding.
``events_written_seconds`` is when the last ``Scheduled`` event had been written
(events yield to bindings and follow the burst).

CPU per pod, from the operating system's accounting of each process over the timed
burst (first pop to last binding; for bind-only, first to last binding):
``cpu_us_per_pod`` the scheduler's process, ``server_cpu_us_per_pod`` the API
server's; ``bind_only_client_cpu_us_per_pod`` and ``bind_only_server_cpu_us_per_pod``
the same for the bind-only run. ``total_cpu_us_per_pod`` and
``total_server_cpu_us_per_pod`` run on until the last ``Scheduled`` event is written:
all the work per pod, however much of it overlapped the burst (a slow burst lets
events start within it). ``--profile-server FILE`` writes a cProfile of the
troupe run's API server to FILE.

``--paced`` adds a third run: the bind-only client again, on a fresh server, held to
the pace troupe reached (its rate limiter at troupe's pods/s with a burst of 8), so
that the server's CPU per pod at that pace (``paced_bind_only_server_cpu_us_per_pod``)
can be told apart from what the troupe run adds.

``--latency SECONDS`` makes both runs' API server hold every request that long
(``bench.server --latency``), as a distant or slow API server would; with
``--qps 300`` (the manifests' client limit) it shows whether bindings keep up with
the client's limit (docs/benchmarks.md, "Bindings at 100 and 300 ms of API
latency"). ``--max-concurrency`` sets ``maxBindingConcurrency`` (unset: the
default; equal to ``--concurrency``: a fixed number of binding slots).
``--bind-only-concurrency`` is the bind-only client's concurrency (default
``--concurrency``).

``--scrapers N`` serves the daemon's ``/metrics`` (``HealthServer``) and has N
clients in another process scrape it in a loop through the troupe run
(``bench.scrapers``): ``scrapes_per_second`` and ``metrics_renders`` say how often
they were answered and how often the registry was rendered for them;
``--metrics-max-age`` is ``ServingLimits.metrics_max_age`` (0: every scrape renders).

``--callgrind``, with the bench itself run under ``valgrind --tool=callgrind
--instr-atstart=no``, counts the scheduler's instructions over the troupe burst
only (``callgrind_control`` switches the instrumentation on at the first pop and off
at the last binding), with events held until the burst is bound (at valgrind's pace
they would start inside it); the bind-only run is skipped. Instruction counts do not
move with the machine's load, so two builds compare to a fraction of a percent
where CPU time per pod spreads by tens of percent on a busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from troupe.api.clock import RealClock
from troupe.api.config import config_document, load_config
from troupe.api.objects import Pod
from troupe.api.tasks import WorkerPool
from troupe.kube import KubeClient, connect
from troupe.kube.health import HealthServer
from troupe.kube.http_guard import ServingLimits
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.observe.stats import AttemptStats
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.scheduler.service.logs import configure_logging
from troupe.scheduler.service.wiring import Options

from bench.server import ServerProcess


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--existing-pods", type=int, default=1000)
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--profile", action="store_true", help="cProfile the troupe run")
    p.add_argument("--profile-server", default="", help="cProfile the troupe run's API server")
    p.add_argument("--qps", type=float, default=100_000.0, help="client write limit, both runs")
    p.add_argument("--latency", type=float, default=0.0, help="seconds the server holds requests")
    p.add_argument("--max-concurrency", type=int, default=0, help="maxBindingConcurrency")
    p.add_argument("--bind-only-concurrency", type=int, default=0, help="default: --concurrency")
    p.add_argument("--scrapers", type=int, default=0, help="clients scraping /metrics")
    p.add_argument("--metrics-max-age", type=float, default=1.0, help="cache of /metrics, s")
    p.add_argument(
        "--paced",
        action="store_true",
        help="also run bind-only held to troupe's pace, to compare the server's CPU per pod",
    )
    p.add_argument(
        "--callgrind",
        action="store_true",
        help="under valgrind's callgrind: count the scheduler's instructions over the burst",
    )


def server_argv(args: argparse.Namespace) -> list[str]:
    return [
        "--nodes",
        str(args.nodes),
        "--existing-pods",
        str(args.existing_pods),
        "--pods",
        str(args.pods),
        # Other benches reuse this with arguments of their own.
        *(["--latency", str(args.latency)] if getattr(args, "latency", 0.0) > 0 else []),
    ]


def callgrind_instrumentation(state: str) -> None:
    """Switch callgrind's instrumentation of this process ``on`` or ``off``."""
    subprocess.run(
        ["callgrind_control", "-i", state, str(os.getpid())], check=True, capture_output=True
    )


def cpu_seconds() -> float:
    """This process's user + system CPU seconds so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def troupe_run(
    args: argparse.Namespace, kubeconfig: Path, server: ServerProcess
) -> dict[str, float]:
    # kube-scheduler's default client limit (qps 50) would cap any scheduler at 50
    # bindings/s; scheduler_perf raises it too. Both runs use the same limit.
    fields: dict[str, object] = {
        "bindingConcurrency": args.concurrency,
        "clientConnection": {"qps": args.qps, "burst": int(args.qps)},
    }
    if args.max_concurrency:
        fields["maxBindingConcurrency"] = args.max_concurrency
    config = load_config(config_document(**fields), catalog(default_registry()))
    daemon = SchedulerDaemon(
        config,
        Connection(kubeconfig=str(kubeconfig)),
        seed=1,
        sync_timeout=300,
        stats=AttemptStats(),  # keeps the latencies the figures are read from
        # Instruction counts hold events back until the bindings drain.
        options=Options(event_hold=1e9) if args.callgrind else None,
    )
    await daemon.start()
    scheduler = daemon.scheduler
    assert scheduler is not None
    scrapers = await Scrapers.start(args, daemon) if args.scrapers else None
    slots = SlotsSeen(scheduler.bindings)
    if args.callgrind:
        callgrind_instrumentation("on")
    start = time.perf_counter()
    cpu_start, server_cpu_start = cpu_seconds(), server.cpu_seconds()
    while scheduler.stats.results["scheduled"] < args.pods:
        await asyncio.sleep(0.01)
    seconds = time.perf_counter() - start
    cpu, server_cpu = cpu_seconds() - cpu_start, server.cpu_seconds() - server_cpu_start
    scraped = await scrapers.stop(seconds) if scrapers is not None else {}
    if args.callgrind:
        callgrind_instrumentation("off")
    # Events yield to bindings and follow the burst: say when they were all written.
    await scheduler.writer.flush(timeout=60)
    events_seconds = time.perf_counter() - start
    # All the work per pod, events included, whether they overlapped the burst or not.
    total_cpu = cpu_seconds() - cpu_start
    total_server_cpu = server.cpu_seconds() - server_cpu_start
    limit = scheduler.bindings.limit
    await daemon.stop(grace=5)
    return {
        "binding_slots": limit,
        "binding_slots_max": slots.most,
        "seconds": seconds,
        "events_seconds": events_seconds,
        "pods_per_second": args.pods / seconds,
        "p99_e2e_ms": scheduler.stats.percentile_ms(99, "attempt"),
        "p99_cycle_ms": scheduler.stats.percentile_ms(99, "cycle"),
        "cpu_us_per_pod": cpu / args.pods * 1e6,
        "server_cpu_us_per_pod": server_cpu / args.pods * 1e6,
        "total_cpu_us_per_pod": total_cpu / args.pods * 1e6,
        "total_server_cpu_us_per_pod": total_server_cpu / args.pods * 1e6,
        **scraped,
    }


class SlotsSeen:
    """The most binding slots the pool had at any moment of the run."""

    def __init__(self, pool: WorkerPool) -> None:
        self.most = pool.limit
        resize = getattr(pool, "resize", None)
        if resize is None:
            return  # a build whose slots are fixed

        def resized(limit: int, refill: int = 1) -> None:
            self.most = max(self.most, limit)
            resize(limit, refill)

        pool.resize = resized  # type: ignore[method-assign]


class Scrapers:
    """``--scrapers``: the daemon's /metrics served, and scraped from another process."""

    def __init__(self, health: HealthServer, proc: asyncio.subprocess.Process) -> None:
        self.health, self.proc = health, proc
        self.renders_at_start = health.metrics.renders

    @classmethod
    async def start(cls, args: argparse.Namespace, daemon: SchedulerDaemon) -> Scrapers:
        health = HealthServer(
            "127.0.0.1",
            0,
            daemon.metrics_registry,
            live=lambda: daemon.healthy,
            ready=lambda: daemon.ready,
            limits=ServingLimits(metrics_max_age=args.metrics_max_age),
        )
        url = f"http://127.0.0.1:{await health.start()}/metrics"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.scrapers",
            url,
            str(args.scrapers),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        await asyncio.sleep(0.5)  # scraping before the burst starts
        return cls(health, proc)

    async def stop(self, seconds: float) -> dict[str, float]:
        renders = self.health.metrics.renders - self.renders_at_start
        out, _ = await self.proc.communicate(b"")
        await self.health.stop()
        return {
            "scrapes_per_second": int(out.strip() or 0) / seconds,
            "metrics_renders": renders,
        }


# The paced bind-only run's token bucket: a few requests at once, as troupe sends them.
PACED_BURST = 8


async def bind_only(
    args: argparse.Namespace,
    kubeconfig: Path,
    server: ServerProcess,
    pace: float | None = None,
) -> dict[str, float]:
    """Post the bindings with no scheduling at all; ``pace``: at most that many per
    second (with a burst of ``PACED_BURST``), else as fast as the server takes them."""
    concurrency = getattr(args, "bind_only_concurrency", 0) or args.concurrency
    api = await connect(str(kubeconfig), None, False, pool_size=concurrency)
    client = KubeClient(
        api,
        RealClock(),
        qps=pace or args.qps,
        burst=PACED_BURST if pace else int(args.qps),
        scheduler_name="bench",
        instance="bench",
    )
    pods = [
        Pod.model_validate({"metadata": {"name": f"pod-{i}", "namespace": "bench"}})
        for i in range(args.pods)
    ]
    # The server generated the UIDs; bind without a UID precondition the way a
    # scheduler that knows them would cost the same request.
    slots = asyncio.Semaphore(concurrency)

    async def one(i: int, p: Pod) -> None:
        async with slots:
            await client.bind(p, f"node-{i % args.nodes}")

    start = time.perf_counter()
    cpu, server_cpu = cpu_seconds(), server.cpu_seconds()
    await asyncio.gather(*(one(i, p) for i, p in enumerate(pods)))
    seconds = time.perf_counter() - start
    cpu, server_cpu = cpu_seconds() - cpu, server.cpu_seconds() - server_cpu
    await api.close()
    return {
        "pods_per_second": args.pods / seconds,
        "cpu_us_per_pod": cpu / args.pods * 1e6,
        "server_cpu_us_per_pod": server_cpu / args.pods * 1e6,
    }


async def _main(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        argv = server_argv(args)
        if args.profile_server:
            argv += ["--profile", args.profile_server]
        async with ServerProcess(argv, kubeconfig) as server:
            if args.profile:
                import cProfile
                import pstats

                prof = cProfile.Profile()
                prof.enable()
                troupe = await troupe_run(args, kubeconfig, server)
                prof.disable()
                pstats.Stats(prof).sort_stats("tottime").print_stats(40)
            else:
                troupe = await troupe_run(args, kubeconfig, server)
        if args.callgrind:
            return {
                "pods": args.pods,
                "pods_per_second": round(troupe["pods_per_second"], 1),
                "binding_slots_at_end": troupe["binding_slots"],
                "binding_slots_max": troupe["binding_slots_max"],
            }
        async with ServerProcess(server_argv(args), kubeconfig) as server:
            limit = await bind_only(args, kubeconfig, server)
        paced: dict[str, float] = {}
        if args.paced:
            async with ServerProcess(server_argv(args), kubeconfig) as server:
                at = await bind_only(args, kubeconfig, server, troupe["pods_per_second"])
            paced = {
                "paced_bind_only_pods_per_second": round(at["pods_per_second"], 1),
                "paced_bind_only_client_cpu_us_per_pod": round(at["cpu_us_per_pod"], 1),
                "paced_bind_only_server_cpu_us_per_pod": round(at["server_cpu_us_per_pod"], 1),
            }
    return {
        "pods": args.pods,
        "nodes": args.nodes,
        "existing_pods": args.existing_pods,
        "seconds": round(troupe["seconds"], 3),
        "events_written_seconds": round(troupe["events_seconds"], 3),
        "pods_per_second": round(troupe["pods_per_second"], 1),
        "bind_only_pods_per_second": round(limit["pods_per_second"], 1),
        "ratio": round(troupe["pods_per_second"] / limit["pods_per_second"], 3),
        "p99_e2e_ms": round(troupe["p99_e2e_ms"], 2),
        "p99_cycle_ms": round(troupe["p99_cycle_ms"], 3),
        "cpu_us_per_pod": round(troupe["cpu_us_per_pod"], 1),
        "server_cpu_us_per_pod": round(troupe["server_cpu_us_per_pod"], 1),
        "total_cpu_us_per_pod": round(troupe["total_cpu_us_per_pod"], 1),
        "total_server_cpu_us_per_pod": round(troupe["total_server_cpu_us_per_pod"], 1),
        "bind_only_client_cpu_us_per_pod": round(limit["cpu_us_per_pod"], 1),
        "bind_only_server_cpu_us_per_pod": round(limit["server_cpu_us_per_pod"], 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "latency_s": args.latency,
        "qps": args.qps,
        "binding_slots_at_end": troupe["binding_slots"],
        "binding_slots_max": troupe["binding_slots_max"],
        **(
            {
                "scrapers": args.scrapers,
                "scrapes_per_second": round(troupe["scrapes_per_second"], 1),
                "metrics_renders": troupe["metrics_renders"],
            }
            if args.scrapers
            else {}
        ),
        **paced,
    }


def run(args: argparse.Namespace) -> int:
    configure_logging("warning")
    import uvloop

    result = uvloop.run(_main(args))
    if not args.callgrind:
        print(
            f"troupe {result['pods_per_second']} pods/s end to end over HTTP; bind-only limit "
            f"{result['bind_only_pods_per_second']} pods/s; ratio {result['ratio']}"
        )
    print(json.dumps(result))
    return 0
