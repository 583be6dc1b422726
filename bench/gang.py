"""Gang scheduling end to end over HTTP: troupe's pod-group cycle against Coscheduling.

``python -m bench gang [--nodes 5000] [--shapes all|GxS,...] [--algorithms troupe,coscheduling]``
runs upstream scheduler_perf's gang shapes on simulated nodes (4 CPU, 32Gi, 110 pods)
through the embedded API server: 1000, 2000 and 3000 gangs of 3 pods; 3, 6 and 9
gangs of 1000 pods; 10 gangs of 5000 pods. A shape is named ``<gangs>x<pods per
gang>``; any such name is accepted (the smoke test runs ``2x3`` on 20 nodes). Gangs
are scheduler-plugins PodGroups (``minMember`` = size); members request 100m /
128Mi, so the largest shape (50000 pods, 5000 CPU) fits 5000 nodes four times over.

Each shape and algorithm gets a fresh server process (``bench.server``) and a fresh
daemon in this process:

- ``troupe``: the default profile; a gang is one entity, placed in one pod-group cycle.
- ``coscheduling``: scheduler-plugins' documented profile (Coscheduling at multiPoint,
  the default PrioritySort disabled at queueSort, ``CoschedulingArgs``); members are
  queued and scheduled one by one and wait at the Permit barrier for their quorum.

Figures per run: ``pods_per_second`` (members bound ÷ seconds from the daemon's start
of scheduling to the last binding), ``groups_scheduled`` (gangs with every member
bound, read back from the API server), and group attempts: for troupe the pod-group
cycles (``AttemptStats.group_attempt_seconds``, upstream's
``scheduler_podgroup_scheduling_attempt_duration_seconds``); Coscheduling has no group
cycle, so one gang's attempt is the sum of every scheduling cycle its members went
through, failed ones included (``GangStats``). Per shape ``ratio`` = troupe ÷
coscheduling ``pods_per_second``. A run still short of its pods after ``--timeout``
seconds is stopped and reported with ``timed_out`` and ``groups_scheduled`` below
``groups``. The last line of output is one JSON object, shape -> algorithm -> figures.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import pstats
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import yaml
from troupe.api.config import ResolvedConfig, config_document, load_config
from troupe.api.gangs import POD_GROUP_LABEL, group_ref_of
from troupe.plugins.registry import catalog, default_registry
from troupe.queue.entity import QueuedEntity, QueuedPodInfo
from troupe.scheduler.loop.schedule_one import Scheduler
from troupe.scheduler.observe.stats import AttemptStats
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.scheduler.service.logs import configure_logging

from bench.server import NAMESPACE, ServerProcess


@dataclass(frozen=True, slots=True)
class Shape:
    gangs: int
    size: int

    @property
    def name(self) -> str:
        return f"{self.gangs}x{self.size}"

    @property
    def pods(self) -> int:
        return self.gangs * self.size


# scheduler_perf's gang workloads (REFERENCE.md "scheduler_perf shapes").
UPSTREAM_SHAPES = tuple(
    Shape(g, s)
    for g, s in ((1000, 3), (2000, 3), (3000, 3), (3, 1000), (6, 1000), (9, 1000), (10, 5000))
)
ALGORITHMS = ("troupe", "coscheduling")
# The gang size whose single attempt the goal is about (< 100 ms).
GOAL_GANG_SIZE, GOAL_MS = 1000, 100.0


def parse_shapes(text: str) -> list[Shape]:
    if text == "all":
        return list(UPSTREAM_SHAPES)
    shapes = []
    for name in text.split(","):
        gangs, sep, size = name.strip().partition("x")
        if not (sep and gangs.isdigit() and size.isdigit() and int(gangs) and int(size)):
            raise argparse.ArgumentTypeError(f"shape {name!r}: expected <gangs>x<pods per gang>")
        shapes.append(Shape(int(gangs), int(size)))
    return shapes


def parse_algorithms(text: str) -> list[str]:
    names = [a.strip() for a in text.split(",")]
    unknown = [a for a in names if a not in ALGORITHMS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown algorithm(s) {unknown}; known: {ALGORITHMS}")
    return names


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--shapes", type=parse_shapes, default="all", help="all, or GxS,...")
    p.add_argument("--algorithms", type=parse_algorithms, default=",".join(ALGORITHMS))
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    p.add_argument("--concurrency", type=int, default=64, help="bindingConcurrency")
    p.add_argument("--permit-wait", type=int, default=60, help="permitWaitingTimeSeconds")
    p.add_argument("--qps", type=float, default=100_000.0, help="client write limit, all runs")
    p.add_argument(
        "--profile", action="store_true", help="cProfile the scheduling cycles only, to stderr"
    )


def scheduler_config(algorithm: str, args: argparse.Namespace, size: int) -> ResolvedConfig:
    # kube-scheduler's default client limit (qps 50) would cap any scheduler at 50
    # bindings/s; scheduler_perf raises it too (as bench e2e does).
    fields: dict[str, Any] = {
        "bindingConcurrency": args.concurrency,
        "clientConnection": {"qps": args.qps, "burst": int(args.qps)},
    }
    if algorithm == "coscheduling":
        # A member waiting at Permit holds one of troupe's binding slots (upstream
        # runs an unbounded goroutine per binding cycle): with fewer slots than
        # members the gang can never reach quorum. Give it room for one whole gang.
        fields["bindingConcurrency"] = max(args.concurrency, size + 1)
        # scheduler-plugins manifests/install/charts/as-a-second-scheduler.
        fields["profiles"] = [
            {
                "schedulerName": "troupe-scheduler",
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                    "queueSort": {"disabled": [{"name": "PrioritySort"}]},
                },
                "pluginConfig": [
                    {
                        "name": "Coscheduling",
                        "args": {"permitWaitingTimeSeconds": args.permit_wait},
                    }
                ],
            }
        ]
    return load_config(config_document(**fields), catalog(default_registry()))


class GangStats(AttemptStats):
    """AttemptStats that also knows which gang each pod scheduling cycle served, and
    when the last pod was bound.

    Neither ``cycle`` nor the attempt hooks name the pod, so ``watch`` wraps the
    queue's ``pop`` (the loop pops, runs one cycle, reports it, pops again: the
    report belongs to the entity popped last). Failed cycles arrive through
    ``attempt`` with their duration (so does a failed binding, rare in these runs,
    which is then counted for the gang popped last). ``bound_pods`` counts bindings
    (``AttemptStats.bound`` is the SLI hook).
    """

    def __init__(self, profiler: cProfile.Profile | None = None) -> None:
        super().__init__()
        self.group_cycle_seconds: defaultdict[str, float] = defaultdict(float)
        self.bound_pods = 0
        self.last_bound = 0.0
        self._current = ""
        self._profiler = profiler

    def watch(self, scheduler: Scheduler) -> None:
        """Attribute cycles to the entity popped; call before the loop's first pop
        (the daemon was built with these statistics)."""
        pop = scheduler.queue.pop

        async def attributed_pop() -> QueuedEntity | None:
            if self._profiler is not None:
                self._profiler.disable()
            entity = await pop()
            self._begin(entity)
            return entity

        setattr(scheduler.queue, "pop", attributed_pop)  # noqa: B010 (bench-only wrapper)

    def _begin(self, entity: QueuedEntity | None) -> None:
        self._current = ""
        if isinstance(entity, QueuedPodInfo):
            ref = group_ref_of(entity.pod_info.pod)
            self._current = ref.key if ref is not None else ""
        if self._profiler is not None and entity is not None:
            self._profiler.enable()

    def _end(self, seconds: float) -> None:
        if self._profiler is not None:
            self._profiler.disable()
        if self._current:
            self.group_cycle_seconds[self._current] += seconds
            self._current = ""

    def cycle(self, seconds: float) -> None:
        self._end(seconds)
        super().cycle(seconds)

    def attempt(self, result: str, profile: str, seconds: float) -> None:
        if result == "scheduled":
            self.bound_pods += 1
            self.last_bound = time.perf_counter()
        elif seconds:
            self._end(seconds)
        super().attempt(result, profile, seconds)

    def group_attempt(
        self, result: str, profile: str, seconds: float, entity_type: str = "podgroup"
    ) -> None:
        if self._profiler is not None:
            self._profiler.disable()
        super().group_attempt(result, profile, seconds, entity_type)


async def bound_per_gang(kubeconfig: Path) -> Counter[str]:
    """Members with a node, per gang, as the API server has them."""
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{server}/api/v1/namespaces/{NAMESPACE}/pods") as resp,
    ):
        resp.raise_for_status()
        items = (await resp.json())["items"]
    return Counter(
        p["metadata"]["labels"][POD_GROUP_LABEL]
        for p in items
        if p["spec"].get("nodeName") and POD_GROUP_LABEL in p["metadata"].get("labels", {})
    )


def milliseconds(values: list[float]) -> dict[str, float]:
    if not values:
        return {
            "mean_group_attempt_ms": 0.0,
            "p99_group_attempt_ms": 0.0,
            "max_group_attempt_ms": 0.0,
        }
    data = np.asarray(values) * 1000.0
    return {
        "mean_group_attempt_ms": round(float(data.mean()), 3),
        "p99_group_attempt_ms": round(float(np.percentile(data, 99)), 3),
        "max_group_attempt_ms": round(float(data.max()), 3),
    }


async def until(done: Callable[[], bool], deadline: float) -> bool:
    while not done():
        if time.perf_counter() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def run_one(
    shape: Shape, algorithm: str, args: argparse.Namespace, profiler: cProfile.Profile | None
) -> dict[str, Any]:
    server_argv = ["--nodes", str(args.nodes), "--gangs", str(shape.gangs)]
    server_argv += ["--gang-size", str(shape.size)]
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        async with ServerProcess(server_argv, kubeconfig):
            config = scheduler_config(algorithm, args, shape.size)
            stats = GangStats(profiler)
            daemon = SchedulerDaemon(
                config,
                Connection(kubeconfig=str(kubeconfig)),
                seed=1,
                sync_timeout=300,
                stats=stats,
            )
            await daemon.start()
            # The scheduling loop task exists but has not run yet: nothing popped.
            assert daemon.scheduler is not None
            stats.watch(daemon.scheduler)
            start = time.perf_counter()
            finished = await until(lambda: stats.bound_pods >= shape.pods, start + args.timeout)
            await daemon.stop(grace=5)
            per_gang = await bound_per_gang(kubeconfig)
    # Every run starts from a collected, unfrozen heap (the daemon froze this one).
    gc.unfreeze()
    gc.collect()
    seconds = max(stats.last_bound - start, 1e-9) if stats.bound_pods else 0.0
    if algorithm == "troupe":
        attempts = list(stats.group_attempt_seconds)
    else:
        attempts = list(stats.group_cycle_seconds.values())
    return {
        "pods": shape.pods,
        "pods_bound": sum(per_gang.values()),
        "groups": shape.gangs,
        "groups_scheduled": sum(1 for n in per_gang.values() if n >= shape.size),
        "seconds": round(seconds, 3),
        "pods_per_second": round(stats.bound_pods / seconds, 1) if seconds else 0.0,
        "group_attempts": len(attempts),
        **milliseconds(attempts),
        "timed_out": not finished,
    }


async def _main(args: argparse.Namespace, emit: Callable[[str], None]) -> dict[str, Any]:
    profiler = cProfile.Profile() if args.profile else None
    result: dict[str, Any] = {}
    for shape in args.shapes:
        figures: dict[str, Any] = {}
        for algorithm in args.algorithms:
            figures[algorithm] = await run_one(shape, algorithm, args, profiler)
            emit(f"{shape.name} {algorithm}: {json.dumps(figures[algorithm])}")
        troupe, cosched = figures.get("troupe"), figures.get("coscheduling")
        if troupe and cosched and cosched["pods_per_second"]:
            figures["ratio"] = round(troupe["pods_per_second"] / cosched["pods_per_second"], 3)
        else:
            figures["ratio"] = None
        result[shape.name] = figures
    if profiler is not None:
        out = io.StringIO()
        for order in ("cumulative", "tottime"):
            pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(30)
        print(out.getvalue(), file=sys.stderr)
    return result


def summary(result: dict[str, Any]) -> list[str]:
    lines = []
    for name, figures in result.items():
        parts = [
            f"{a} {f['pods_per_second']} pods/s, {f['groups_scheduled']}/{f['groups']} gangs, "
            f"mean group attempt {f['mean_group_attempt_ms']} ms"
            for a, f in figures.items()
            if isinstance(f, dict)
        ]
        lines.append(f"{name}: " + "; ".join(parts) + f"; ratio {figures['ratio']}")
        troupe = figures.get("troupe")
        if troupe and name.endswith(f"x{GOAL_GANG_SIZE}"):
            lines.append(
                f"  troupe: slowest {GOAL_GANG_SIZE}-pod gang attempt "
                f"{troupe['max_group_attempt_ms']} ms (goal < {GOAL_MS:g} ms)"
            )
    return lines


def run(args: argparse.Namespace) -> int:
    configure_logging("warning")
    import uvloop

    def emit(line: str) -> None:
        print(line, flush=True)

    result = uvloop.run(_main(args, emit))
    for line in summary(result):
        print(line)
    print(json.dumps(result))
    return 0
