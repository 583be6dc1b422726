"""SchedulingBasic in process (upstream scheduler_perf shape).

5000 nodes (4 CPU, 32Gi, 110 pods), ``--existing-pods`` already bound, then
``--pods`` pods of 100m / 500Mi scheduled with the default profile through the whole
engine (queue, framework, cache, binding cycle). Bindings go to an in-process client
that echoes them back like the watch would. Reports scheduling decisions per second.

``--callgrind``, under ``valgrind --tool=callgrind --instr-atstart=no``, counts
instructions from the frozen heap to the last binding only (as ``bench e2e``'s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time

from troupe.api.clock import RealClock
from troupe.api.config import config_document, load_config
from troupe.api.objects import Node, Pod
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.service.gc_tuning import freeze_long_lived, tune_gc
from troupe.scheduler.service.logs import configure_logging
from troupe.scheduler.service.wiring import Options, build_scheduler

from bench import server
from bench.e2e import callgrind_instrumentation
from bench.inprocess import EchoClient


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--existing-pods", type=int, default=1000)
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--profile", action="store_true", help="run under cProfile, print top 25")
    p.add_argument(
        "--callgrind",
        action="store_true",
        help="under valgrind's callgrind: count instructions over the burst only",
    )


def make_node(i: int) -> Node:
    return Node.model_validate(server.node(i))


def make_pod(name: str, node: str = "") -> Pod:
    obj = server.pod(name, node)
    obj["metadata"]["uid"] = name
    return Pod.model_validate(obj)


async def _run(args: argparse.Namespace) -> dict[str, float]:
    tune_gc()
    registry = default_registry()
    config = load_config(config_document(), catalog(registry))
    client = EchoClient()
    wired = build_scheduler(config, registry, client, RealClock(), options=Options(seed=1))
    scheduler = wired.scheduler
    handlers = wired.handlers()
    client.on_bound = handlers.on_pod_update
    for i in range(args.nodes):
        handlers.on_node_add(make_node(i))
    for i in range(args.existing_pods):
        handlers.on_pod_add(make_pod(f"existing-{i}", f"node-{i % args.nodes}"))
    pods = [make_pod(f"pod-{i}") for i in range(args.pods)]
    for pod in pods:
        handlers.on_pod_add(pod)
    freeze_long_lived()  # as the daemon does once its caches are synced
    if args.callgrind:
        callgrind_instrumentation("on")
    start = time.perf_counter()
    loop = asyncio.create_task(scheduler.run())
    while scheduler.stats.results["scheduled"] < args.pods:
        await asyncio.sleep(0.01)
        if loop.done():
            break
    seconds = time.perf_counter() - start
    if args.callgrind:
        callgrind_instrumentation("off")
    await scheduler.stop()
    await loop
    scheduled = scheduler.stats.results["scheduled"]
    return {
        "pods": args.pods,
        "nodes": args.nodes,
        "existing_pods": args.existing_pods,
        "scheduled": scheduled,
        "seconds": round(seconds, 3),
        "pods_per_second": round(scheduled / seconds, 1),
        # The scheduling decision: pop to hand-off to the binding cycle.
        "p50_attempt_ms": round(scheduler.stats.percentile_ms(50, "cycle"), 3),
        "p99_attempt_ms": round(scheduler.stats.percentile_ms(99, "cycle"), 3),
        # Including the in-process binding (waits behind the loop's own work).
        "p99_attempt_with_binding_ms": round(scheduler.stats.percentile_ms(99), 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def run(args: argparse.Namespace) -> int:
    configure_logging("warning")
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        result = prof.runcall(asyncio.run, _run(args))
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    else:
        import uvloop

        result = uvloop.run(_run(args))
    print(
        f"scheduled {result['scheduled']}/{result['pods']} pods on {result['nodes']} nodes "
        f"in {result['seconds']}s: {result['pods_per_second']} pods/s, "
        f"attempt p99 {result['p99_attempt_ms']} ms"
    )
    print(json.dumps(result))
    return 0 if result["scheduled"] == result["pods"] else 1
