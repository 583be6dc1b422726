"""Soak: steady churn of pods and gangs for ``--minutes``, sampling the scheduler's memory.

``python -m bench soak --minutes 30 [--nodes 500] [--rate 40] [--gang-share 0.5]
[--gang-size 4] [--run-seconds 5] [--interval 30] [--warmup-minutes M]`` starts the
embedded API server in its own process (``bench.server --kubelets``: a simulated kubelet
on every node) and the troupe daemon in this one, as ``bench.churn`` does, with the
daemon's production defaults (no per-attempt latencies kept). Every second the
harness creates one batch of ``--rate`` pods over HTTP, as controllers would, spread
evenly over the second: ``--gang-share`` of them in gangs of ``--gang-size`` (a
scheduler-plugins PodGroup with ``minMember`` = the size, members joined by the
``scheduling.x-k8s.io/pod-group`` label), the rest plain pods. Every pod carries
``troupe.dev/run-seconds``, so once bound its kubelet runs it and marks it Succeeded
``--run-seconds`` later; ``--delete-after`` seconds after a batch was created the harness
deletes its pods and PodGroups (one delete-collection each, by the batch's label), as a
Job's TTL controller would.

Every ``--interval`` seconds it prints and records the scheduler process's resident
memory (``/proc/self/statm``, now, not the peak), the ``Pod`` objects alive in it (no
collection is forced), the event loop's lag over the interval (how late a 10 ms
asyncio timer fired: the largest and the 99th percentile) and the pods bound so far.
On a shared machine a process waits for a core too, so the same timer also runs in an
otherwise idle process (``python -m bench.soak``) and its lag over the same interval is
recorded beside the scheduler's (``idle_lag_*``): the difference is the scheduler's own.
At the end it prints the memory slope after warm-up (least squares over the samples
from ``--warmup-minutes`` on, default the first 20% of the run, in MB per 10 minutes);
the last line of output is one JSON object with every sample and the slope.

``--diagnose`` prints, at every sample, the object types whose count grew most since
the previous one (``gc.get_objects``) and one line of allocator figures: pymalloc's
arenas (1 MiB each, returned only when empty) and bytes in used blocks, glibc malloc's
heap and bytes in use (objects over 512 bytes: large dicts, lists, arrays), the
collector's generation counts and the event recorder's series; ``--tracemalloc`` the
source lines whose allocations grew most (slow: for finding a leak, not for the
figures).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import yaml
from troupe.api.config import config_document, load_config
from troupe.api.gangs import POD_GROUP_LABEL
from troupe.api.objects import Pod
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.loop.schedule_one import Scheduler
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.scheduler.service.logs import configure_logging
from troupe.sim.kubelet import RUN_SECONDS_ANNOTATION

from bench import server
from bench.allocators import allocator_figures
from bench.churn import rss_mb
from bench.server import NAMESPACE, ServerProcess

BATCH_LABEL = "soak-batch"
LAG_PERIOD = 0.01  # seconds between the lag timer's wake-ups
PODGROUPS = "apis/scheduling.x-k8s.io/v1alpha1"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--minutes", type=float, required=True, help="how long the churn runs")
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--rate", type=int, default=40, help="pods created per second")
    p.add_argument("--gang-share", type=float, default=0.5, help="fraction of pods in gangs")
    p.add_argument("--gang-size", type=int, default=4, help="members (and minMember) per gang")
    p.add_argument("--run-seconds", type=float, default=5.0, help="a pod runs this long")
    p.add_argument(
        "--delete-after", type=float, default=10.0, help="seconds from a batch's creation"
    )
    p.add_argument("--interval", type=float, default=30.0, help="seconds between samples")
    p.add_argument("--warmup-minutes", type=float, default=None, help="default: 20%% of --minutes")
    p.add_argument("--concurrency", type=int, default=32, help="creates in flight")
    p.add_argument("--diagnose", action="store_true", help="type counts that grew, to stderr")
    p.add_argument("--tracemalloc", action="store_true", help="lines that grew, to stderr")


# --- figures -----------------------------------------------------------------------------


def slope_mb_per_10min(samples: Sequence[tuple[float, float]], warmup: float) -> float | None:
    """Least-squares slope of (minutes, MB) samples taken at or after ``warmup``
    minutes, in MB per 10 minutes; None with fewer than two such samples."""
    points = [(t, mb) for t, mb in samples if t >= warmup]
    if len(points) < 2 or len({t for t, _ in points}) < 2:
        return None
    t, mb = np.array(points).T
    return float(np.polyfit(t, mb, 1)[0] * 10.0)


class LoopLag:
    """How late a periodic ``LAG_PERIOD`` timer fires: the event loop's lag.

    A tick that overlaps the sampler's own work (counting objects) is left out, so the
    figures are the scheduler's, not the measurement's."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.measuring = True

    async def run(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(LAG_PERIOD)
            late = time.perf_counter() - start - LAG_PERIOD
            if self.measuring:
                self.lags.append(late)
            self.measuring = True

    def take(self) -> tuple[float, float]:
        """(max, p99) in ms since the last take."""
        lags, self.lags = self.lags, []
        if not lags:
            return 0.0, 0.0
        return max(lags) * 1e3, float(np.percentile(lags, 99)) * 1e3


class IdleLag:
    """``python -m bench.soak``: a ``LoopLag`` in an otherwise idle process, the control
    for the scheduler's. Each line on stdin is answered with "<max> <p99>" (ms) since
    the previous one."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.soak",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )

    async def take(self) -> tuple[float, float]:
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(b"\n")
        await self.proc.stdin.drain()
        lag_max, lag_p99 = (await self.proc.stdout.readline()).split()
        return float(lag_max), float(lag_p99)

    async def stop(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            await self.proc.wait()


async def _idle_lag() -> None:
    lag = LoopLag()
    loop = asyncio.get_running_loop()
    timer = loop.create_task(lag.run())
    while await loop.run_in_executor(None, sys.stdin.readline):
        lag_max, lag_p99 = lag.take()
        print(f"{lag_max:.2f} {lag_p99:.2f}", flush=True)
    timer.cancel()


@dataclass(slots=True)
class Sample:
    minutes: float
    rss_mb: float
    pods_alive: int
    lag_max_ms: float
    lag_p99_ms: float
    idle_lag_max_ms: float  # the same timer in an idle process, over the same interval
    idle_lag_p99_ms: float
    pods_created: int
    pods_bound: int
    pods_in_cache: int
    pods_in_informer: int
    cpu_percent: float  # this process (scheduler and harness) over the interval
    load_average: float  # the machine's, over the last minute


class Sampler:
    def __init__(self, args: argparse.Namespace, lag: LoopLag, idle: IdleLag) -> None:
        self.args = args
        self.lag = lag
        self.idle = idle
        self.samples: list[Sample] = []
        self._types: Counter[str] = Counter()
        self._snapshot: tracemalloc.Snapshot | None = None
        self._cpu = (time.perf_counter(), time.process_time())

    async def take(
        self, minutes: float, scheduler: Scheduler, informer_pods: int, created: int
    ) -> None:
        lag_max, lag_p99 = self.lag.take()
        idle_max, idle_p99 = await self.idle.take()
        wall, cpu = time.perf_counter(), time.process_time()
        cpu_percent = 100.0 * (cpu - self._cpu[1]) / max(1e-9, wall - self._cpu[0])
        objects = gc.get_objects()
        alive = sum(1 for obj in objects if type(obj) is Pod)
        if self.args.diagnose:
            self._diagnose(objects, scheduler)
        del objects
        if self.args.tracemalloc:
            self._trace()
        sample = Sample(
            minutes=round(minutes, 2),
            rss_mb=round(rss_mb(), 1),
            pods_alive=alive,
            lag_max_ms=round(lag_max, 2),
            lag_p99_ms=round(lag_p99, 2),
            idle_lag_max_ms=idle_max,
            idle_lag_p99_ms=idle_p99,
            pods_created=created,
            pods_bound=scheduler.stats.results["scheduled"],
            pods_in_cache=scheduler.cache.pod_count,
            pods_in_informer=informer_pods,
            cpu_percent=round(cpu_percent, 1),
            load_average=round(os.getloadavg()[0], 2),
        )
        self.samples.append(sample)
        self._cpu = (time.perf_counter(), time.process_time())
        self.lag.measuring = False  # the tick that waited for this sample does not count
        print(
            f"{sample.minutes:6.2f} min: rss {sample.rss_mb} MB, {alive} Pod objects, "
            f"loop lag max {sample.lag_max_ms} ms p99 {sample.lag_p99_ms} ms "
            f"(idle process: {idle_max} / {idle_p99} ms), "
            f"{sample.pods_bound} pods bound of {created} created; cpu {sample.cpu_percent}%, "
            f"load {sample.load_average}",
            flush=True,
        )

    def _diagnose(self, objects: list[object], scheduler: Scheduler) -> None:
        types = Counter(type(obj).__qualname__ for obj in objects)
        if self._types:
            grown = (types - self._types).most_common(12)
            print(
                "  grew: " + ", ".join(f"{n} +{c} (={types[n]})" for n, c in grown),
                file=sys.stderr,
            )
        self._types = types
        print("  " + allocator_figures(scheduler), file=sys.stderr, flush=True)

    def _trace(self) -> None:
        snapshot = tracemalloc.take_snapshot()
        if self._snapshot is not None:
            for stat in snapshot.compare_to(self._snapshot, "lineno")[:10]:
                print(f"  {stat}", file=sys.stderr)
        self._snapshot = snapshot


# --- the harness ---------------------------------------------------------------------------


class Churn:
    """Creates one batch a second, spread over the second, and deletes each batch
    ``--delete-after`` seconds after it was created."""

    def __init__(self, args: argparse.Namespace, session: aiohttp.ClientSession, api: str):
        self.args = args
        self.session = session
        self.api = api
        self.created = 0
        self.gangs = round(args.rate * args.gang_share / args.gang_size) if args.gang_size else 0
        self.plain = max(0, args.rate - self.gangs * args.gang_size)
        self._slots = asyncio.Semaphore(args.concurrency)

    def batch(self, n: int) -> list[list[tuple[str, dict[str, Any]]]]:
        """Batch ``n`` as units created together, each (collection path, object): a plain
        pod, or a gang (its PodGroup, then its members), the gangs spread among the pods."""
        labels = {BATCH_LABEL: str(n)}
        annotations = {RUN_SECONDS_ANNOTATION: str(self.args.run_seconds)}
        pods = f"api/v1/namespaces/{NAMESPACE}/pods"
        groups = f"{PODGROUPS}/namespaces/{NAMESPACE}/podgroups"
        units = [
            [(pods, server.pod(f"soak-{n}-{i}", labels=labels, annotations=annotations))]
            for i in range(self.plain)
        ]
        for g in range(self.gangs):
            name = f"soak-{n}-g{g}"
            gang = [(groups, server.pod_group(name, self.args.gang_size, labels))]
            member_labels = {**labels, POD_GROUP_LABEL: name}
            for m in range(self.args.gang_size):
                member = server.pod(
                    f"{name}-{m}", memory="128Mi", labels=member_labels, annotations=annotations
                )
                gang.append((pods, member))
            units.insert(g * (len(units) + 1) // self.gangs, gang)
        return units

    async def _post(self, path: str, body: dict[str, Any]) -> None:
        async with self._slots, self.session.post(f"{self.api}/{path}", json=body) as resp:
            resp.raise_for_status()
        if body["kind"] == "Pod":
            self.created += 1

    async def _create_unit(self, unit: list[tuple[str, dict[str, Any]]]) -> None:
        group = [(path, body) for path, body in unit if body["kind"] == "PodGroup"]
        for path, body in group:
            await self._post(path, body)
        await asyncio.gather(*(self._post(p, body) for p, body in unit if body["kind"] == "Pod"))

    async def create(self, n: int, due: float) -> None:
        """Batch ``n``, its units evenly over the second from ``due`` (perf_counter)."""
        units = self.batch(n)
        async with asyncio.TaskGroup() as posts:
            for i, unit in enumerate(units):
                wait = due + i / len(units) - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                posts.create_task(self._create_unit(unit))

    async def delete(self, n: int) -> None:
        query = {"labelSelector": f"{BATCH_LABEL}={n}"}
        for path in (
            f"api/v1/namespaces/{NAMESPACE}/pods",
            f"{PODGROUPS}/namespaces/{NAMESPACE}/podgroups",
        ):
            async with self.session.delete(f"{self.api}/{path}", params=query) as resp:
                resp.raise_for_status()

    async def run(self, seconds: float) -> None:
        """Batch ``n`` is due ``n`` seconds after the start (later if the server lags)."""
        start = time.perf_counter()
        delay = max(1, round(self.args.delete_after))
        n = 0
        while time.perf_counter() - start < seconds:
            work = [self.create(n, max(start + n, time.perf_counter()))]
            if n >= delay:
                work.append(self.delete(n - delay))
            await asyncio.gather(*work)
            n += 1


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    warmup = args.warmup_minutes if args.warmup_minutes is not None else 0.2 * args.minutes
    server_argv = ["--nodes", str(args.nodes), "--kubelets", "--pod-group-crd"]
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        async with ServerProcess(server_argv, kubeconfig):
            # No client-side write limit: the bench measures memory, not the qps cap.
            config = load_config(
                config_document(clientConnection={"qps": 100_000.0, "burst": 100_000}),
                catalog(default_registry()),
            )
            daemon = SchedulerDaemon(
                config, Connection(kubeconfig=str(kubeconfig)), seed=1, sync_timeout=300
            )
            await daemon.start()
            scheduler, informers = daemon.scheduler, daemon.informers
            assert scheduler is not None and informers is not None
            api = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
            lag, idle = LoopLag(), IdleLag()
            await idle.start()
            sampler = Sampler(args, lag, idle)
            if args.tracemalloc:
                tracemalloc.start()
            try:
                async with aiohttp.ClientSession() as session, asyncio.TaskGroup() as tasks:
                    churn = Churn(args, session, api)
                    timer = tasks.create_task(lag.run())
                    start = time.perf_counter()

                    async def sample() -> None:
                        minutes = (time.perf_counter() - start) / 60.0
                        pods = len(informers.pods.store)
                        await sampler.take(minutes, scheduler, pods, churn.created)

                    await sample()
                    driver = tasks.create_task(churn.run(args.minutes * 60.0))
                    k = 1
                    while not driver.done():
                        due = start + k * args.interval - time.perf_counter()
                        await asyncio.wait({driver}, timeout=max(0.0, due))
                        if not driver.done():
                            await sample()
                            k += 1
                    if time.perf_counter() - start > (k - 1) * args.interval + 1.0:
                        await sample()  # the end of the churn, unless one was just taken
                    timer.cancel()
            finally:
                await idle.stop()
                await daemon.stop(grace=5)
    slope = slope_mb_per_10min([(s.minutes, s.rss_mb) for s in sampler.samples], warmup)
    return {
        "minutes": args.minutes,
        "nodes": args.nodes,
        "rate": args.rate,
        "gangs_per_second": churn.gangs,
        "gang_size": args.gang_size,
        "run_seconds": args.run_seconds,
        "delete_after": args.delete_after,
        "interval_seconds": args.interval,
        "warmup_minutes": round(warmup, 2),
        "pods_created": churn.created,
        "pods_bound": scheduler.stats.results["scheduled"],
        "results": dict(scheduler.stats.results),
        "samples": [asdict(s) for s in sampler.samples],
        "rss_mb_per_10min": round(slope, 2) if slope is not None else None,
    }


def run(args: argparse.Namespace) -> int:
    configure_logging("warning")
    import uvloop

    result = uvloop.run(_main(args))
    slope = result["rss_mb_per_10min"]
    print(
        f"memory slope after {result['warmup_minutes']} min of warm-up: "
        + (f"{slope} MB per 10 minutes" if slope is not None else "too few samples")
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    import uvloop

    uvloop.run(_idle_lag())
