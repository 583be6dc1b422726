"""One chaos run: the cluster, two replicas, work arriving, faults, settling, the verdict.

1. Start the embedded cluster in this process (so faults and records are a function
   call away, as bench/server.py does for the other benchmarks), record its writes
   and the holders of the Lease the replicas elect on, start two ``troupe run``
   replicas and wait for a leader.
2. While work arrives (plain pods in waves, gangs; the oldest retired when the
   cluster is past its target share), inject every fault kind in the seeded order,
   one at a time, with a seeded pause between two. The controllers (recreating
   what is gone, deleting orphaned pods) and the replicas' supervisor run all along.
3. Stop the faults and the arrivals, resume anything paused, and let the system
   settle: until nothing is lost and no gang is partial on two checks a second apart,
   or ``Settings.settle_seconds``.
4. Judge (``verdict.py``), print one JSON object as the last line, stop the replicas
   (SIGTERM) and the cluster. The replicas' logs are kept when the run fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from troupe.sim.apiserver.machinery.errors import ApiError
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec

from bench.chaos.faults import Injector
from bench.chaos.lease import LeaseTimeline
from bench.chaos.plan import FAULT_KINDS, LONG, QUICK, Settings, fault_order
from bench.chaos.replicas import Replicas
from bench.chaos.verdict import INVARIANTS, cluster_verdict, ledger_verdict
from bench.chaos.workload import NAMESPACE, Tracker, Workload

Emit = Callable[[str], None]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="each fault once, in under 3 minutes")
    p.add_argument("--seed", type=int, default=1, help="the plan: fault order and parameters")
    p.add_argument("--workdir", default=None, help="keep the replicas' logs here")


async def arrivals(workload: Workload, settings: Settings, rng: random.Random) -> None:
    while True:
        await asyncio.sleep(rng.uniform(*settings.wave_every))
        if rng.random() < 0.6:
            workload.plain_wave(rng.randint(5, 25))
        else:
            workload.gang()
        workload.retire()


async def controllers(workload: Workload) -> None:
    while True:
        workload.reconcile()
        await asyncio.sleep(0.5)


async def settle(store: Any, seconds: float) -> tuple[bool, float]:
    """Wait until nothing is lost and no gang partial, twice in a row a second apart."""
    start = time.monotonic()
    calm = 0
    while time.monotonic() - start < seconds:
        now = cluster_verdict(store)
        calm = calm + 1 if now["lost"] == 0 and now["partial_gangs"] == 0 else 0
        if calm >= 2:
            return True, time.monotonic() - start
        await asyncio.sleep(1.0)
    return False, time.monotonic() - start


def lease_transitions(replicas: Replicas) -> int:
    lease = replicas.settings.lease
    rt = replicas.store.resolve("leases.coordination.k8s.io")
    obj = replicas.store.find(rt, lease.namespace, lease.name) or {}
    return int((obj.get("spec") or {}).get("leaseTransitions") or 0)


def _create_namespaces(cluster: SimCluster, *names: str) -> None:
    for name in names:
        with contextlib.suppress(ApiError):
            cluster.store.create(
                "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            )


def _owned(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
    return asyncio.get_running_loop().create_task(coro, name=name)


async def _cancel(*tasks: asyncio.Task[None]) -> None:
    for task in tasks:
        task.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for task, result in zip(tasks, results, strict=True):
        if isinstance(result, Exception):
            raise RuntimeError(f"{task.get_name()} failed") from result


async def chaos(args: argparse.Namespace, workdir: Path, emit: Emit) -> dict[str, Any]:
    settings = QUICK if args.quick else LONG
    started = time.monotonic()
    spec = NodeSpec(
        count=settings.nodes,
        cpu=settings.node_cpu,
        memory=settings.node_memory,
        zones=("zone-a", "zone-b", "zone-c"),
    )
    cluster = SimCluster([spec], bookmark_interval=5.0, history=100_000)
    await cluster.start()
    _create_namespaces(cluster, NAMESPACE, settings.lease.namespace)
    ledger = cluster.server.record_writes(settings.lease.namespace, settings.lease.name)
    timeline = LeaseTimeline(cluster.store, ledger)
    nodes_ever = set(cluster.node_names)
    stop_nodes = cluster.store.listen(
        "nodes", lambda _, node: nodes_ever.add(node["metadata"]["name"])
    )
    tracker = Tracker(cluster.store)
    workload = Workload(cluster.store, random.Random(f"{args.seed}/workload"), settings)
    kubeconfig = cluster.write_kubeconfig(workdir / "kubeconfig")
    replicas = Replicas(settings, kubeconfig, workdir, cluster.store)
    rng = random.Random(args.seed)
    injector = Injector(cluster, workload, replicas, tracker, settings, rng)
    await replicas.start_all()
    background = [
        _owned(replicas.supervise(), "supervisor"),
        _owned(controllers(workload), "controllers"),
    ]
    arriving: asyncio.Task[None] | None = None
    try:
        if await replicas.wait_for_leader(60) is None:
            raise RuntimeError(f"no replica started leading in 60s; logs in {workdir}")
        emit(f"{time.monotonic() - started:6.1f}s leader elected; injecting faults")
        arriving = _owned(
            arrivals(workload, settings, random.Random(f"{args.seed}/arrivals")), "arrivals"
        )
        for kind in fault_order(FAULT_KINDS, settings.repeats, rng):
            await asyncio.sleep(rng.uniform(*settings.pause))
            said = await injector.inject(kind)
            emit(f"{time.monotonic() - started:6.1f}s {kind}: {said}")
        await _cancel(arriving)
        arriving = None
        cluster.server.faults.reset()
        for replica in replicas.replicas:
            replicas.resume(replica)
        emit(f"{time.monotonic() - started:6.1f}s faults stopped; settling")
        settled, settle_seconds = await settle(cluster.store, settings.settle_seconds)
        await _cancel(*background)
        background = []
        result: dict[str, Any] = {
            "seed": args.seed,
            "quick": bool(args.quick),
            "faults_injected": {k: injector.injected[k] for k in FAULT_KINDS},
            **cluster_verdict(cluster.store),
            **ledger_verdict(ledger, nodes_ever, timeline, replicas.closures()),
            "partial_gangs_held": injector.partial_held,
            "settled": settled,
            "settle_seconds": round(settle_seconds, 1),
            "fault_requests_hit": dict(injector.requests_hit),
            "faults_missed_moment": dict(injector.missed),
            "paused_leader_exit_codes": dict(injector.paused_exit_codes),
            "lease_edit_exit_codes": {
                k: dict(v) for k, v in sorted(injector.lease_edit_exit_codes.items())
            },
            "replica_restarts": replicas.restarts,
            "replica_exit_codes": replicas.exit_codes(),
            "lease_transitions": lease_transitions(replicas),
            **{f"{k}_total": v for k, v in workload.created.items()},
        }
    finally:
        tasks = [*background, *([arriving] if arriving is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await replicas.stop_all()
        stop_nodes()
        timeline.stop()
        tracker.stop()
        await cluster.stop()
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def run(args: argparse.Namespace) -> int:
    import uvloop
    from troupe.scheduler.service.logs import configure_logging

    configure_logging("warning")
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="troupe-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)

    def emit(line: str) -> None:
        print(line, flush=True)

    result = uvloop.run(chaos(args, workdir, emit))
    failed = any(result[k] for k in INVARIANTS)
    if failed or args.workdir:
        print(f"replica logs: {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(result))
    return 1 if failed else 0
