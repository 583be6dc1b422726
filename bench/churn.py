"""Memory under churn: rounds of pods created, bound and deleted, end to end over HTTP.

``python -m bench churn [--rounds 5] [--pods 6000] [--nodes 500]`` starts the embedded
API server in its own process (``bench.server``, nodes only) and the troupe daemon in
this one, as ``bench.e2e`` does: informers, queue, scheduling loop, bindings, status
writes and events all take the production path. Each round

1. creates ``--pods`` pods (the scheduler_perf template, 100m / 500Mi, labelled with
   their round) with one POST each, as a controller would;
2. waits until the scheduler has bound all of them;
3. deletes them with one delete-collection call and ``--grace`` seconds of grace, so
   each pod is first updated to terminating and then removed, as a scale-down does;
4. waits until the scheduler's cache and pod informer hold no pod, collects garbage
   and records this process's resident memory and the number of ``Pod`` objects
   still alive.

With no pod left in the cluster the figures after each round should stay flat:
memory bounded by the live cluster, not by the pods that came and went. RSS is read
from ``/proc/self/statm`` (Linux). The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from troupe.api.config import config_document, load_config
from troupe.api.objects import Pod
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.loop.schedule_one import Scheduler
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.scheduler.service.logs import configure_logging

from bench import server
from bench.server import NAMESPACE, ServerProcess


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--pods", type=int, default=6000, help="pods created and deleted per round")
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--grace", type=int, default=1, help="gracePeriodSeconds of the deletes")
    p.add_argument("--concurrency", type=int, default=64, help="pod creates in flight")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per round at most")


def rss_mb() -> float:
    """Resident memory of this process now (not the peak)."""
    with open("/proc/self/statm") as statm:
        resident_pages = int(statm.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def live_pods() -> int:
    """``Pod`` objects alive after a full collection."""
    gc.collect()
    return sum(1 for obj in gc.get_objects() if type(obj) is Pod)


async def until(done: Callable[[], bool], deadline: float, what: str) -> None:
    while not done():
        if time.perf_counter() >= deadline:
            raise TimeoutError(f"timed out waiting until {what}")
        await asyncio.sleep(0.02)


async def create_pods(
    session: aiohttp.ClientSession, api: str, round_: int, count: int, concurrency: int
) -> None:
    slots = asyncio.Semaphore(concurrency)
    path = f"{api}/api/v1/namespaces/{NAMESPACE}/pods"

    async def one(i: int) -> None:
        body = server.pod(f"churn-{round_}-{i}", labels={"round": str(round_)})
        async with slots, session.post(path, json=body) as resp:
            resp.raise_for_status()

    await asyncio.gather(*(one(i) for i in range(count)))


async def delete_round(session: aiohttp.ClientSession, api: str, round_: int, grace: int) -> None:
    query = {"labelSelector": f"round={round_}", "gracePeriodSeconds": str(grace)}
    path = f"{api}/api/v1/namespaces/{NAMESPACE}/pods"
    async with session.delete(path, params=query) as resp:
        resp.raise_for_status()


async def churn_round(
    daemon: SchedulerDaemon,
    scheduler: Scheduler,
    session: aiohttp.ClientSession,
    api: str,
    round_: int,
    args: argparse.Namespace,
) -> dict[str, Any]:
    assert daemon.informers is not None
    pods_informer = daemon.informers.pods
    start = time.perf_counter()
    deadline = start + args.timeout
    scheduled_before = scheduler.stats.results["scheduled"]
    await create_pods(session, api, round_, args.pods, args.concurrency)
    await until(
        lambda: scheduler.stats.results["scheduled"] - scheduled_before >= args.pods,
        deadline,
        f"round {round_}'s pods are bound",
    )
    bound_seconds = time.perf_counter() - start
    await delete_round(session, api, round_, args.grace)
    await until(
        lambda: scheduler.cache.pod_count == 0 and not pods_informer.store,
        deadline,
        f"round {round_}'s pods are gone",
    )
    await scheduler.writer.flush(timeout=60)
    alive = live_pods()
    return {
        "round": round_ + 1,
        "rss_mb": round(rss_mb(), 1),
        "pods_alive": alive,
        "bound_seconds": round(bound_seconds, 2),
        "seconds": round(time.perf_counter() - start, 2),
    }


async def _main(args: argparse.Namespace, emit: Callable[[str], None]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        async with ServerProcess(["--nodes", str(args.nodes)], kubeconfig):
            # No client-side write limit: the bench measures memory, not the qps cap.
            config = load_config(
                config_document(clientConnection={"qps": 100_000.0, "burst": 100_000}),
                catalog(default_registry()),
            )
            daemon = SchedulerDaemon(
                config, Connection(kubeconfig=str(kubeconfig)), seed=1, sync_timeout=300
            )
            await daemon.start()
            scheduler = daemon.scheduler
            assert scheduler is not None
            api = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
            live_pods()  # collects first, as after every round
            baseline_mb = round(rss_mb(), 1)
            emit(f"before any pod: rss {baseline_mb} MB")
            rounds = []
            try:
                async with aiohttp.ClientSession() as session:
                    for r in range(args.rounds):
                        figures = await churn_round(daemon, scheduler, session, api, r, args)
                        rounds.append(figures)
                        emit(
                            f"round {figures['round']}: {args.pods} pods created, bound in "
                            f"{figures['bound_seconds']} s and deleted; rss {figures['rss_mb']} "
                            f"MB, {figures['pods_alive']} Pod objects alive"
                        )
            finally:
                await daemon.stop(grace=5)
    after = [f["rss_mb"] for f in rounds]
    return {
        "rounds": args.rounds,
        "pods_per_round": args.pods,
        "nodes": args.nodes,
        "grace_seconds": args.grace,
        "rss_mb_before": baseline_mb,
        "rss_mb_after_round": after,
        "pods_alive_after_round": [f["pods_alive"] for f in rounds],
        # Growth from the first round to the last, per round, and in the last round:
        # the first round sets the high-water mark; bounded memory then levels off.
        "rss_mb_per_round": round((after[-1] - after[0]) / max(1, len(after) - 1), 1),
        "rss_mb_last_round": round(after[-1] - after[-2], 1) if len(after) > 1 else 0.0,
    }


def run(args: argparse.Namespace) -> int:
    configure_logging("warning")
    import uvloop

    def emit(line: str) -> None:
        print(line, flush=True)

    result = uvloop.run(_main(args, emit))
    print(json.dumps(result))
    return 0
