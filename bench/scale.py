"""Memory and throughput of the daemon at scale, end to end over HTTP.

``python -m bench scale --nodes 5000 --existing-pods 1000 --pods 50000`` starts the
embedded API server in its own process with the nodes (4 CPU, 32Gi, 110 pods), the
bound pods and the pending pods of ``bench e2e``, and runs the troupe daemon in this
process with its production defaults (no per-attempt latencies kept) until every
pending pod is bound. It reports

- ``sync_seconds``: from the daemon's start until its informers have listed
  everything and it starts scheduling;
- ``pods_per_second``: pending pods bound ÷ seconds from then to the last binding, and
  ``cpu_us_per_pod``: this process's CPU time over the same span ÷ pods bound (on a
  shared machine, steadier than the rate);
- this process's resident memory (``/proc/self/statm``) once synced
  (``rss_mb_synced``: every pod pending in the queue) and once every pod is bound and
  every event written (``rss_mb_bound``), its peak (``peak_rss_mb``, ``ru_maxrss``), and
  the ``Pod`` objects alive then (one per pod in the cluster is the floor).

Unlike ``bench e2e`` there is no bind-only run in the same process, so the peak is the
scheduler's own. The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from troupe.api.config import config_document, load_config
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.scheduler.service.logs import configure_logging

from bench.churn import live_pods, rss_mb
from bench.e2e import server_argv
from bench.server import ServerProcess


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--existing-pods", type=int, default=1000)
    p.add_argument("--pods", type=int, default=50000)
    p.add_argument("--concurrency", type=int, default=64, help="bindingConcurrency")
    p.add_argument("--qps", type=float, default=100_000.0, help="client write limit")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds to bind every pod")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        async with ServerProcess(server_argv(args), kubeconfig, start_timeout=1800.0):
            # kube-scheduler's default client limit (qps 50) would cap the bindings.
            config = load_config(
                config_document(
                    bindingConcurrency=args.concurrency,
                    clientConnection={"qps": args.qps, "burst": int(args.qps)},
                ),
                catalog(default_registry()),
            )
            daemon = SchedulerDaemon(
                config, Connection(kubeconfig=str(kubeconfig)), seed=1, sync_timeout=1800
            )
            rss_before = rss_mb()
            start = time.perf_counter()
            await daemon.start()
            synced, cpu_synced = time.perf_counter(), time.process_time()
            rss_synced = rss_mb()
            scheduler = daemon.scheduler
            assert scheduler is not None
            deadline = synced + args.timeout
            while scheduler.stats.results["scheduled"] < args.pods:
                if time.perf_counter() > deadline:
                    break
                await asyncio.sleep(0.01)
            seconds = time.perf_counter() - synced
            cpu_seconds = time.process_time() - cpu_synced
            scheduled = scheduler.stats.results["scheduled"]
            await scheduler.writer.flush(timeout=120)
            rss_bound = rss_mb()
            peak = peak_rss_mb()
            gc.unfreeze()  # the daemon froze the heap once synced: count every Pod
            alive = live_pods()
            await daemon.stop(grace=5)
    return {
        "nodes": args.nodes,
        "existing_pods": args.existing_pods,
        "pods": args.pods,
        "scheduled": scheduled,
        "sync_seconds": round(synced - start, 2),
        "seconds": round(seconds, 2),
        "pods_per_second": round(scheduled / seconds, 1),
        "cpu_us_per_pod": round(cpu_seconds / max(1, scheduled) * 1e6, 1),
        "rss_mb_before": round(rss_before, 1),
        "rss_mb_synced": round(rss_synced, 1),
        "rss_mb_bound": round(rss_bound, 1),
        "peak_rss_mb": round(peak, 1),
        "pods_alive": alive,
    }


def run(args: argparse.Namespace) -> int:
    configure_logging("warning")
    import uvloop

    result = uvloop.run(_main(args))
    print(
        f"{result['scheduled']}/{result['pods']} pods bound on {result['nodes']} nodes "
        f"({result['existing_pods']} bound before) at {result['pods_per_second']} pods/s; "
        f"rss {result['rss_mb_synced']} MB synced, {result['rss_mb_bound']} MB bound, "
        f"peak {result['peak_rss_mb']} MB"
    )
    print(json.dumps(result))
    return 0 if result["scheduled"] == result["pods"] else 1
