"""Gang scheduling end to end over HTTP: troupe's pod-group cycle against Coscheduling.

``python -m bench gang [--nodes 5000] [--shapes all|topology|GxS[@LEVELS][:CPU],...]
[--algorithms troupe,coscheduling] [--zones 5] [--racks 20]``
runs upstream scheduler_perf's gang shapes on simulated nodes (4 CPU, 32Gi, 110 pods)
through the embedded API server: 1000, 2000 and 3000 gangs of 3 pods; 3, 6 and 9
gangs of 1000 pods; 10 gangs of 5000 pods. A shape is named ``<gangs>x<pods per
gang>``; any such name is accepted (the smoke test runs ``2x3`` on 20 nodes). Gangs
are scheduler-plugins PodGroups (``minMember`` = size); members request 100m /
128Mi, so the largest shape (50000 pods, 5000 CPU) fits 5000 nodes four times over.

Topology-aware placement (KEP-5732, ``troupe.scheduler.gangs.topology``): nodes carry
``topology.kubernetes.io/zone`` round-robin over ``--zones`` and ``troupe.dev/rack``
(``--racks`` per zone, ``bench.server``), by default 5 zones x 20 racks, 50 nodes per
rack on 5000 nodes. A shape name may hold the gang's levels after ``@``: the required
one first, then preferred ones, outermost first, joined by ``+`` (``zone``, ``rack``, or
a node label key), put on every PodGroup as ``topology.troupe.dev/required`` and
``topology.troupe.dev/preferred``; and a member CPU request other than 100m after
``:``. ``--shapes topology`` runs three shapes, each right after its unconstrained twin
(the same gangs without the annotations), so the two compare within one run:

- ``1000x8@rack``: 1000 gangs of 8 (100m), each in one rack;
- ``10x256@zone+rack:500m``: 10 gangs of 256, each in one zone, preferably one rack
  (256 x 500m = 128 CPU fits one rack's 200 CPU, so a gang needs no fallback; only one
  such gang fits a rack, the others go to other racks);
- ``1x1000@zone``: one gang of 1000 (100m) in one zone (1000 nodes).

After every run the pods and nodes are read back from the API server: per gang, how
many zones and racks its bound members span (``zones_per_gang`` and
``racks_per_gang``: domains -> gangs), and for a constrained shape
``straddling_gangs``, the gangs whose members are in more than one domain of the
required label (must be 0). A constrained shape's ``attempt_ratio`` is its troupe mean
group attempt ÷ its twin's, when the twin ran in the same invocation.

``--profile`` runs cProfile over the scheduling cycles only (pop to decision) and
prints the top functions to stderr; ``--profile-dump FILE`` also writes the pstats data.

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
from troupe.scheduler.loop.schedule_one import LoopHooks
from troupe.scheduler.observe.stats import AttemptStats
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.scheduler.service.logs import configure_logging
from troupe.scheduler.service.wiring import Options
from troupe.sim.nodespec import RACK_LABEL, ZONE_LABEL

from bench.server import NAMESPACE, ServerProcess

DEFAULT_CPU = "100m"
# Short names of the topology levels a shape name may use (any label key works too).
LEVELS = {"zone": ZONE_LABEL, "rack": RACK_LABEL}


@dataclass(frozen=True, slots=True)
class Shape:
    gangs: int
    size: int
    # Topology levels, required first then preferred, joined by "+" ("" for none).
    topology: str = ""
    cpu: str = DEFAULT_CPU

    @property
    def name(self) -> str:
        name = f"{self.gangs}x{self.size}"
        if self.topology:
            name += f"@{self.topology}"
        if self.cpu != DEFAULT_CPU:
            name += f":{self.cpu}"
        return name

    @property
    def pods(self) -> int:
        return self.gangs * self.size

    @property
    def required(self) -> str:
        """The label key every gang must stay within one value of ("" for none)."""
        first = self.topology.split("+")[0] if self.topology else ""
        return LEVELS.get(first, first)

    @property
    def preferred(self) -> tuple[str, ...]:
        return tuple(LEVELS.get(k, k) for k in self.topology.split("+")[1:])

    @property
    def unconstrained(self) -> Shape:
        """The same gangs without topology."""
        return Shape(self.gangs, self.size, "", self.cpu)


# scheduler_perf's gang workloads (REFERENCE.md "scheduler_perf shapes").
UPSTREAM_SHAPES = tuple(
    Shape(g, s)
    for g, s in ((1000, 3), (2000, 3), (3000, 3), (3, 1000), (6, 1000), (9, 1000), (10, 5000))
)
# Topology-aware placement (issue 13), each run after its unconstrained twin.
TOPOLOGY_SHAPES = (
    Shape(1000, 8, "rack"),
    Shape(10, 256, "zone+rack", "500m"),
    Shape(1, 1000, "zone"),
)
ALGORITHMS = ("troupe", "coscheduling")
# The gang size whose single attempt the goal is about (< 100 ms).
GOAL_GANG_SIZE, GOAL_MS = 1000, 100.0
# A constrained gang's mean attempt against the same gang's unconstrained (at most).
GOAL_ATTEMPT_RATIO = 2.0


def parse_shape(name: str) -> Shape:
    rest, _, cpu = name.strip().partition(":")
    rest, _, topology = rest.partition("@")
    gangs, sep, size = rest.partition("x")
    if not (sep and gangs.isdigit() and size.isdigit() and int(gangs) and int(size)):
        raise argparse.ArgumentTypeError(
            f"shape {name!r}: expected <gangs>x<pods per gang>[@<levels>][:<cpu>]"
        )
    if "@" in name and not all(topology.split("+")):
        raise argparse.ArgumentTypeError(f"shape {name!r}: empty topology level")
    if ":" in name and not cpu:
        raise argparse.ArgumentTypeError(f"shape {name!r}: empty CPU request")
    return Shape(int(gangs), int(size), topology, cpu or DEFAULT_CPU)


def parse_shapes(text: str) -> list[Shape]:
    if text == "all":
        return list(UPSTREAM_SHAPES)
    if text == "topology":
        return [s for shape in TOPOLOGY_SHAPES for s in (shape.unconstrained, shape)]
    return [parse_shape(name) for name in text.split(",")]


def parse_algorithms(text: str) -> list[str]:
    names = [a.strip() for a in text.split(",")]
    unknown = [a for a in names if a not in ALGORITHMS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown algorithm(s) {unknown}; known: {ALGORITHMS}")
    return names


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument(
        "--shapes",
        type=parse_shapes,
        default="all",
        help="all, topology, or GxS[@LEVELS][:CPU],...",
    )
    p.add_argument("--zones", type=int, default=5, help="zones over the nodes")
    p.add_argument("--racks", type=int, default=20, help="racks per zone")
    p.add_argument("--algorithms", type=parse_algorithms, default=",".join(ALGORITHMS))
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    p.add_argument("--concurrency", type=int, default=64, help="bindingConcurrency")
    p.add_argument("--permit-wait", type=int, default=60, help="permitWaitingTimeSeconds")
    p.add_argument("--qps", type=float, default=100_000.0, help="client write limit, all runs")
    p.add_argument(
        "--profile", action="store_true", help="cProfile the scheduling cycles only, to stderr"
    )
    p.add_argument(
        "--profile-dump", default="", help="with --profile, also write the pstats data here"
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

    Neither ``cycle`` nor the attempt hooks name the pod, so ``loop_hooks`` follow the
    loop's pops (the loop pops, runs one cycle, reports it, pops again: the
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

    def loop_hooks(self) -> LoopHooks:
        """The loop's hooks that attribute cycles to the entity popped (the daemon
        is built with them and with these statistics)."""
        return LoopHooks(before_pop=self._before_pop, popped=self._begin)

    def _before_pop(self) -> None:
        if self._profiler is not None:
            self._profiler.disable()

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


@dataclass(slots=True)
class Bound:
    """Where each gang's members are bound, as the API server has them."""

    # Gang -> the nodes of its bound members, one entry per member.
    nodes: defaultdict[str, list[str]]
    # Node -> its labels.
    labels: dict[str, dict[str, str]]

    def per_gang(self) -> Counter[str]:
        return Counter({gang: len(nodes) for gang, nodes in self.nodes.items()})

    def domains(self, key: str) -> dict[str, set[str]]:
        """Gang -> the values of node label ``key`` its bound members are on."""
        return {
            gang: {self.labels.get(n, {}).get(key, "") for n in nodes}
            for gang, nodes in self.nodes.items()
        }

    def spread(self, key: str) -> dict[str, int]:
        """How many domains of ``key`` the gangs span: domains -> gangs (JSON keys)."""
        counts = Counter(len(values) for values in self.domains(key).values())
        return {str(n): counts[n] for n in sorted(counts)}

    def straddling(self, key: str) -> int:
        """Gangs with bound members in more than one domain of ``key`` (or on a node
        without the label)."""
        return sum(1 for v in self.domains(key).values() if len(v) > 1 or "" in v)


async def bound_gangs(kubeconfig: Path) -> Bound:
    """The gangs' bound members and the nodes' labels, from the API server."""
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{server}/api/v1/namespaces/{NAMESPACE}/pods") as resp:
            resp.raise_for_status()
            pods = (await resp.json())["items"]
        async with session.get(f"{server}/api/v1/nodes") as resp:
            resp.raise_for_status()
            nodes = (await resp.json())["items"]
    per_gang: defaultdict[str, list[str]] = defaultdict(list)
    for p in pods:
        gang = p["metadata"].get("labels", {}).get(POD_GROUP_LABEL)
        if gang and p["spec"].get("nodeName"):
            per_gang[gang].append(p["spec"]["nodeName"])
    labels = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in nodes}
    return Bound(per_gang, labels)


async def bound_per_gang(kubeconfig: Path) -> Counter[str]:
    """Members with a node, per gang, as the API server has them."""
    return (await bound_gangs(kubeconfig)).per_gang()


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
    server_argv += ["--gang-size", str(shape.size), "--gang-cpu", shape.cpu]
    server_argv += ["--zones", str(args.zones), "--racks", str(args.racks)]
    if shape.required:
        server_argv += ["--gang-required", shape.required]
    if shape.preferred:
        server_argv += ["--gang-preferred", ",".join(shape.preferred)]
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
                options=Options(hooks=stats.loop_hooks()),
            )
            await daemon.start()
            start = time.perf_counter()
            finished = await until(lambda: stats.bound_pods >= shape.pods, start + args.timeout)
            await daemon.stop(grace=5)
            bound = await bound_gangs(kubeconfig)
    per_gang = bound.per_gang()
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
        "zones_per_gang": bound.spread(ZONE_LABEL),
        "racks_per_gang": bound.spread(RACK_LABEL),
        "straddling_gangs": bound.straddling(shape.required) if shape.required else None,
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
    compare_twins(args.shapes, result)
    if profiler is not None:
        out = io.StringIO()
        for order in ("cumulative", "tottime"):
            pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(30)
        print(out.getvalue(), file=sys.stderr)
        if args.profile_dump:
            profiler.dump_stats(args.profile_dump)
    return result


def compare_twins(shapes: list[Shape], result: dict[str, Any]) -> None:
    """A constrained shape's mean group attempt ÷ its unconstrained twin's, per
    algorithm, when both ran."""
    for shape in shapes:
        twin = result.get(shape.unconstrained.name)
        if not shape.topology or twin is None:
            continue
        for algorithm, figures in result[shape.name].items():
            base = twin.get(algorithm)
            if isinstance(figures, dict) and base and base["mean_group_attempt_ms"]:
                ratio = figures["mean_group_attempt_ms"] / base["mean_group_attempt_ms"]
                figures["attempt_ratio"] = round(ratio, 3)


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
        if troupe and parse_shape(name).size == GOAL_GANG_SIZE:
            lines.append(
                f"  troupe: slowest {GOAL_GANG_SIZE}-pod gang attempt "
                f"{troupe['max_group_attempt_ms']} ms (goal < {GOAL_MS:g} ms)"
            )
        for algorithm, f in figures.items():
            if not isinstance(f, dict) or f.get("straddling_gangs") is None:
                continue
            line = (
                f"  {algorithm}: {f['straddling_gangs']} gangs straddle a domain of the "
                f"required level (must be 0); racks per gang {f['racks_per_gang']}"
            )
            if "attempt_ratio" in f:
                line += (
                    f"; mean attempt {f['attempt_ratio']}x unconstrained "
                    f"(goal <= {GOAL_ATTEMPT_RATIO:g}x)"
                )
            lines.append(line)
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
