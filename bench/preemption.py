"""Gang preemption end to end over HTTP: a full cluster, then high-priority gangs.

``python -m bench preemption [--nodes 5000] [--shapes 1x1000,100x8,1x64@rack]
[--pods-per-node 10] [--gang-share 0.5] [--timeout 600] [--minimum]``

The cluster (``bench.server``, a separate process, with simulated kubelets so evicted
pods go away): ``--nodes`` nodes of 4 CPU, by default 5 zones x 20 racks, every one full
of low-priority pods (PriorityClass ``low``, value 100), ``--pods-per-node`` of them
requesting 4 CPU / ``--pods-per-node`` each (10 x 400m: 50,000 pods on 5000 nodes),
already bound and Running. ``--gang-share`` of them (by default half) are the members of
``all`` gangs of 8 (v1beta1 PodGroups, ``disruptionMode: {all: {}}``, ``spec.priority``
100; a gang's 8 members are on 8 consecutive nodes), the rest single pods. With the
default fill every node holds 5 single pods and 5 gang members.

Then the preemptor shape, ``<gangs>x<pods per gang>[@rack|@zone|@<label key>]``:
v1beta1 PodGroups with ``spec.priority`` 1000 and members of PriorityClass ``high``
(value 1000), each member requesting as much CPU as one low-priority pod (``--cpu``, by
default the same), so every member needs at least one eviction. ``@rack`` puts
``spec.schedulingConstraints.topology: [{key: troupe.dev/rack}]`` on the PodGroups. The
default shapes:

- ``1x1000``: one gang of 1000 (at least 1000 evictions);
- ``100x8``: 100 gangs of 8;
- ``1x64@rack``: one gang of 64 within one rack (50 nodes, 250 single pods).

Figures per shape, from one fresh server and one fresh troupe daemon (this process):

- ``pods_bound`` of ``pods`` (read back from the API server), ``groups_scheduled``,
  ``seconds`` from the daemon's start of scheduling to the last preemptor binding, and
  ``timed_out`` when the preemptors were still not bound after ``--timeout`` seconds (a
  scheduling cycle is not interrupted: the timeout is checked between cycles);
- ``victims``: low-priority pods gone (deleted or terminating) at the end, split into
  ``victims_single`` and ``victims_gang_members``; ``partly_evicted_gangs``, the ``all``
  gangs with some but not all members gone (must be 0);
- ``victims_lower_bound``: the preemptors' CPU over one victim's, rounded up; every node
  is full and every victim frees the same CPU, so no plan evicts fewer pods. It is the
  minimum whenever single pods alone can make the room, as in the three default shapes
  with the default fill (members the size of a victim, 5 single pods on every node, 250
  in every rack);
- decision time: troupe's pod-group cycles by result (``AttemptStats.group_attempt``);
  ``preemption_attempts`` / ``mean_preemption_attempt_ms`` / ``max_preemption_attempt_ms``
  over the cycles whose result was ``waiting_on_preemption`` (the cycle that chose and
  evicted victims, and the later ones of the same gang that found its victims still
  terminating); ``decisions``, ``mean_decision_ms`` and ``max_decision_ms`` over each
  gang's first such cycle, which is always the one that decided; ``group_attempts`` and
  ``max_group_attempt_ms``: result -> count, result -> slowest cycle.

``--minimum`` runs small instances instead (``--min-nodes`` 8 nodes, 2 zones x 2 racks,
``--min-pods-per-node`` 4 low-priority pods of 1 CPU, the same ``--gang-share``: 16
single pods and 2 ``all`` gangs of 8; ``--min-shapes``, by default ``1x6``, ``2x4``,
``1x4@rack``, ``1x6@rack``, ``1x20``). Before the daemon starts, the cluster is read
back from the API server and ``minimum_victims`` searches it exhaustively: every subset
of victim units (a single pod, or a whole ``all`` gang), fewest units first, until no
subset can evict fewer pods than the best found; a subset is feasible when every
preemptor gang then fits, checked by first-fit decreasing of each gang's members over
the nodes (for a topology gang, over each domain's nodes in turn; gangs largest first,
each in the first domain it fits). First-fit is exact for members of equal size, as here;
with mixed sizes or several constrained gangs it may call a feasible subset infeasible,
so the minimum is then an upper bound. Only CPU is compared (memory and pod count are
ample). Troupe then runs on that instance: ``victims``, ``minimum`` and ``excess_pct``
(victims over the minimum, %; None when troupe bound no complete preemptor set).

Targets (the issue): under 1 s per decision for the 1000-pod gang; victims within 10% of
the minimum. The last line of output is one JSON object, shape -> figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import yaml
from troupe.api.quantity import to_milli
from troupe.queue.entity import QueuedEntity, QueuedGroupInfo
from troupe.scheduler.loop.schedule_one import LoopHooks
from troupe.scheduler.observe.stats import AttemptStats
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.scheduler.service.logs import configure_logging
from troupe.scheduler.service.wiring import Options
from troupe.sim.nodespec import RACK_LABEL, ZONE_LABEL

from bench.gang import scheduler_config, until
from bench.server import NAMESPACE, ServerProcess, existing_group, gang_name

NODE_CPU_MILLI = 4000  # bench.server's nodes
VICTIM_GANG_SIZE = 8
LOW, HIGH = ("low", 100), ("high", 1000)
LEVELS = {"zone": ZONE_LABEL, "rack": RACK_LABEL}
DEFAULT_SHAPES = "1x1000,100x8,1x64@rack"
DEFAULT_MIN_SHAPES = "1x6,2x4,1x4@rack,1x6@rack,1x20"
# The targets.
GOAL_DECISION_S, GOAL_GANG_SIZE, GOAL_EXCESS_PCT = 1.0, 1000, 10.0
PREEMPTING = "waiting_on_preemption"
# Exhaustive search refuses more victim units than this (2**22 subsets).
MAX_UNITS = 22


@dataclass(frozen=True, slots=True)
class Shape:
    gangs: int
    size: int
    topology: str = ""  # "rack", "zone" or a node label key; "" for none

    @property
    def name(self) -> str:
        return f"{self.gangs}x{self.size}" + (f"@{self.topology}" if self.topology else "")

    @property
    def pods(self) -> int:
        return self.gangs * self.size

    @property
    def required(self) -> str:
        return LEVELS.get(self.topology, self.topology)


def parse_shape(name: str) -> Shape:
    rest, at, topology = name.strip().partition("@")
    gangs, sep, size = rest.partition("x")
    if not (sep and gangs.isdigit() and size.isdigit() and int(gangs) and int(size)):
        raise argparse.ArgumentTypeError(
            f"shape {name!r}: expected <gangs>x<pods per gang>[@rack|@zone|@<label key>]"
        )
    if at and not topology:
        raise argparse.ArgumentTypeError(f"shape {name!r}: empty topology level")
    return Shape(int(gangs), int(size), topology)


def parse_shapes(text: str) -> list[Shape]:
    return [parse_shape(name) for name in text.split(",")]


@dataclass(frozen=True, slots=True)
class Fill:
    """The low-priority pods filling every node."""

    nodes: int
    zones: int
    racks: int
    pods_per_node: int
    gang_share: float

    @property
    def pods(self) -> int:
        return self.nodes * self.pods_per_node

    @property
    def gangs(self) -> int:
        return int(self.pods * self.gang_share) // VICTIM_GANG_SIZE

    @property
    def cpu_milli(self) -> int:
        return NODE_CPU_MILLI // self.pods_per_node


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--zones", type=int, default=5, help="zones over the nodes")
    p.add_argument("--racks", type=int, default=20, help="racks per zone")
    p.add_argument("--pods-per-node", type=int, default=10, help="low-priority pods per node")
    p.add_argument(
        "--gang-share", type=float, default=0.5, help="share of them in `all` gangs of 8"
    )
    p.add_argument("--shapes", type=parse_shapes, default=DEFAULT_SHAPES, help="GxS[@LEVEL],...")
    p.add_argument("--cpu", default="", help="preemptor member CPU (default: a victim's)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    p.add_argument("--minimum", action="store_true", help="small instances vs brute force")
    p.add_argument("--min-nodes", type=int, default=8)
    p.add_argument("--min-zones", type=int, default=2)
    p.add_argument("--min-racks", type=int, default=2)
    p.add_argument("--min-pods-per-node", type=int, default=4)
    p.add_argument("--min-shapes", type=parse_shapes, default=DEFAULT_MIN_SHAPES)
    p.add_argument("--min-timeout", type=float, default=30.0, help="seconds per small run")
    p.add_argument("--concurrency", type=int, default=64, help="bindingConcurrency")
    p.add_argument("--qps", type=float, default=100_000.0, help="client write limit")


class PreemptionStats(AttemptStats):
    """AttemptStats keeping each pod-group cycle's duration by result, each gang's
    first ``waiting_on_preemption`` cycle, and preemptor bindings.

    The group cycle reports its result before the loop pops again, so ``loop_hooks`` follow
    the loop's pops to know which gang a report is about (as ``bench.gang``)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_result: defaultdict[str, list[float]] = defaultdict(list)
        self.first_preemption: dict[str, float] = {}
        self.bound_pods = 0
        self.last_bound = 0.0
        self._current = ""

    def loop_hooks(self) -> LoopHooks:
        """The loop's hooks that note which gang was popped last."""
        return LoopHooks(popped=self._popped)

    def _popped(self, entity: QueuedEntity | None) -> None:
        self._current = entity.key if isinstance(entity, QueuedGroupInfo) else ""

    def attempt(self, result: str, profile: str, seconds: float) -> None:
        if result == "scheduled":
            self.bound_pods += 1
            self.last_bound = time.perf_counter()
        super().attempt(result, profile, seconds)

    def group_attempt(
        self, result: str, profile: str, seconds: float, entity_type: str = "podgroup"
    ) -> None:
        self.by_result[result].append(seconds)
        if result == PREEMPTING and self._current:
            self.first_preemption.setdefault(self._current, seconds)
        super().group_attempt(result, profile, seconds, entity_type)


# --- the brute-force minimum ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unit:
    """Victims evicted together: one pod, or every member of an ``all`` gang."""

    name: str
    pods: tuple[tuple[str, int], ...]  # (node, CPU millicores) per pod


@dataclass(frozen=True, slots=True)
class Preemptor:
    name: str
    cpu: tuple[int, ...]  # per member, millicores
    required: str = ""  # node label key the gang must stay within one value of


@dataclass(slots=True)
class Cluster:
    free: dict[str, int]  # node -> free CPU millicores
    labels: dict[str, dict[str, str]]
    units: list[Unit]
    preemptors: list[Preemptor]
    priority: int = 0
    notes: list[str] = field(default_factory=list)


def _fit_gang(free: dict[str, int], nodes: Sequence[str], cpu: Sequence[int]) -> bool:
    """First-fit decreasing of ``cpu`` over ``nodes`` (in order), into ``free``; on
    success ``free`` keeps the placements."""
    trial = {n: free[n] for n in nodes}
    for need in sorted(cpu, reverse=True):
        for n in nodes:
            if trial[n] >= need:
                trial[n] -= need
                break
        else:
            return False
    free.update(trial)
    return True


def fits(
    free: dict[str, int], labels: dict[str, dict[str, str]], preemptors: Sequence[Preemptor]
) -> bool:
    """Whether every preemptor gang fits in ``free`` (first-fit decreasing; a
    topology gang in the first domain of its key it fits in)."""
    free = dict(free)
    nodes = sorted(free, key=lambda n: (len(n), n))
    for gang in sorted(preemptors, key=lambda g: -sum(g.cpu)):
        if not gang.required:
            if not _fit_gang(free, nodes, gang.cpu):
                return False
            continue
        domains: defaultdict[str, list[str]] = defaultdict(list)
        for n in nodes:
            value = labels.get(n, {}).get(gang.required)
            if value is not None:
                domains[value].append(n)
        if not any(_fit_gang(free, domains[d], gang.cpu) for d in sorted(domains)):
            return False
    return True


def minimum_victims(cluster: Cluster) -> tuple[int, list[str]] | None:
    """The fewest pods to evict (and the units) so that every preemptor gang fits,
    by exhaustive search over subsets of victim units; None if none does."""
    units = cluster.units
    if len(units) > MAX_UNITS:
        raise ValueError(f"{len(units)} victim units: too many for an exhaustive search")
    demand = sum(sum(g.cpu) for g in cluster.preemptors)
    have = sum(cluster.free.values())
    best: tuple[int, list[str]] | None = None
    for k in range(len(units) + 1):
        # Every unit holds at least one pod: k units cannot beat a best of k pods.
        if best is not None and k >= best[0]:
            break
        for subset in itertools.combinations(units, k):
            cost = sum(len(u.pods) for u in subset)
            if best is not None and cost >= best[0]:
                continue
            if have + sum(c for u in subset for _, c in u.pods) < demand:
                continue
            free = dict(cluster.free)
            for u in subset:
                for node, cpu in u.pods:
                    free[node] += cpu
            if fits(free, cluster.labels, cluster.preemptors):
                best = (cost, [u.name for u in subset])
    return best


def _cpu_milli(pod: dict[str, Any]) -> int:
    total = 0
    for c in pod["spec"].get("containers") or []:
        cpu = ((c.get("resources") or {}).get("requests") or {}).get("cpu")
        if cpu is not None:
            total += to_milli(str(cpu))
    return total


def cluster_from(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], groups: list[dict[str, Any]]
) -> Cluster:
    """The search's view of the API server's nodes, pods and v1beta1 PodGroups: free
    CPU per node, every bound pod of lower priority than the preemptors as a victim
    unit (the members of an ``all`` gang as one unit), the unbound pods' gangs as
    preemptors."""
    free = {n["metadata"]["name"]: to_milli(str(n["status"]["allocatable"]["cpu"])) for n in nodes}
    labels = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in nodes}
    spec_of = {g["metadata"]["name"]: g["spec"] for g in groups}
    pending: defaultdict[str, list[int]] = defaultdict(list)
    priority = 0
    for p in pods:
        if not p["spec"].get("nodeName"):
            group = (p["spec"].get("schedulingGroup") or {}).get("podGroupName", "")
            pending[group or p["metadata"]["name"]].append(_cpu_milli(p))
            priority = max(priority, int(p["spec"].get("priority") or 0))
    units: list[Unit] = []
    gangs: defaultdict[str, list[tuple[str, int]]] = defaultdict(list)
    for p in pods:
        node = p["spec"].get("nodeName")
        if not node:
            continue
        cpu = _cpu_milli(p)
        free[node] -= cpu
        if int(p["spec"].get("priority") or 0) >= priority:
            continue
        group = (p["spec"].get("schedulingGroup") or {}).get("podGroupName", "")
        if group and "all" in (spec_of.get(group, {}).get("disruptionMode") or {}):
            gangs[group].append((node, cpu))
        else:
            units.append(Unit(p["metadata"]["name"], ((node, cpu),)))
    units += [Unit(name, tuple(members)) for name, members in sorted(gangs.items())]
    preemptors = []
    for name, requests in sorted(pending.items()):
        constraints = spec_of.get(name, {}).get("schedulingConstraints") or {}
        keys = [t["key"] for t in constraints.get("topology") or []]
        preemptors.append(Preemptor(name, tuple(requests), keys[0] if keys else ""))
    return Cluster(free, labels, units, preemptors, priority)


# --- one run -------------------------------------------------------------------------------


async def _get(session: aiohttp.ClientSession, url: str) -> list[dict[str, Any]]:
    async with session.get(url) as resp:
        resp.raise_for_status()
        items: list[dict[str, Any]] = (await resp.json())["items"]
        return items


async def read_cluster(kubeconfig: Path) -> tuple[list[Any], list[Any], list[Any]]:
    """Nodes, pods and v1beta1 PodGroups, as the API server has them."""
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    async with aiohttp.ClientSession() as session:
        nodes = await _get(session, f"{server}/api/v1/nodes")
        pods = await _get(session, f"{server}/api/v1/namespaces/{NAMESPACE}/pods")
        groups = await _get(
            session, f"{server}/apis/scheduling.k8s.io/v1beta1/namespaces/{NAMESPACE}/podgroups"
        )
    return nodes, pods, groups


def server_argv(shape: Shape, fill: Fill, cpu: str) -> list[str]:
    argv = ["--nodes", str(fill.nodes), "--zones", str(fill.zones), "--racks", str(fill.racks)]
    argv += ["--kubelets", "--priority-classes", f"{LOW[0]}={LOW[1]},{HIGH[0]}={HIGH[1]}"]
    argv += ["--existing-pods", str(fill.pods), "--existing-cpu", f"{fill.cpu_milli}m"]
    argv += ["--existing-priority-class", LOW[0], "--existing-running"]
    argv += ["--existing-gangs", str(fill.gangs), "--existing-gang-size", str(VICTIM_GANG_SIZE)]
    argv += ["--gangs", str(shape.gangs), "--gang-size", str(shape.size)]
    argv += ["--gang-cpu", cpu or f"{fill.cpu_milli}m", "--gang-api", "v1beta1"]
    argv += ["--gang-priority-class", HIGH[0]]
    if shape.required:
        argv += ["--gang-required", shape.required]
    return argv


def milliseconds(values: list[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 0.0
    data = np.asarray(values) * 1000.0
    return round(float(data.mean()), 3), round(float(data.max()), 3)


def evictions(pods: list[dict[str, Any]], fill: Fill) -> dict[str, Any]:
    """Low-priority pods gone or terminating at the end, and ``all`` gangs partly so."""
    alive = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
    single = members = 0
    gone_per_gang: Counter[str] = Counter()
    for i in range(fill.pods):
        if f"existing-{i}" in alive:
            continue
        group = existing_group(i, fill.gangs, VICTIM_GANG_SIZE)
        if group:
            members += 1
            gone_per_gang[group] += 1
        else:
            single += 1
    return {
        "victims": single + members,
        "victims_single": single,
        "victims_gang_members": members,
        "victim_gangs": sum(1 for n in gone_per_gang.values() if n == VICTIM_GANG_SIZE),
        "partly_evicted_gangs": sum(1 for n in gone_per_gang.values() if n < VICTIM_GANG_SIZE),
    }


async def run_one(
    shape: Shape, fill: Fill, args: argparse.Namespace, timeout: float, minimum: bool
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        async with ServerProcess(server_argv(shape, fill, args.cpu), kubeconfig):
            if minimum:
                began = time.perf_counter()
                found = minimum_victims(cluster_from(*await read_cluster(kubeconfig)))
                figures["minimum"] = found[0] if found is not None else None
                figures["minimum_units"] = found[1] if found is not None else None
                figures["search_seconds"] = round(time.perf_counter() - began, 3)
            config = scheduler_config("troupe", args, shape.size)
            stats = PreemptionStats()
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
            finished = await until(lambda: stats.bound_pods >= shape.pods, start + timeout)
            await daemon.stop(grace=5)
            # The kubelets finish the evictions' graceful deletes; give them a moment.
            await asyncio.sleep(1.0)
            _, pods, _ = await read_cluster(kubeconfig)
    gc.unfreeze()
    gc.collect()
    bound: Counter[str] = Counter()
    for p in pods:
        if (p["spec"].get("priorityClassName") == HIGH[0]) and p["spec"].get("nodeName"):
            bound[(p["spec"].get("schedulingGroup") or {}).get("podGroupName", "")] += 1
    preempting = stats.by_result.get(PREEMPTING, [])
    mean_ms, max_ms = milliseconds(preempting)
    first_mean, first_max = milliseconds(list(stats.first_preemption.values()))
    figures = {
        "pods": shape.pods,
        "pods_bound": sum(bound.values()),
        "groups": shape.gangs,
        "groups_scheduled": sum(1 for g in range(shape.gangs) if bound[gang_name(g)] >= shape.size),
        "seconds": round(stats.last_bound - start, 3) if stats.bound_pods else None,
        "timed_out": not finished,
        **evictions(pods, fill),
        "preemption_attempts": len(preempting),
        "mean_preemption_attempt_ms": mean_ms,
        "max_preemption_attempt_ms": max_ms,
        "decisions": len(stats.first_preemption),
        "mean_decision_ms": first_mean,
        "max_decision_ms": first_max,
        "group_attempts": {r: len(v) for r, v in sorted(stats.by_result.items())},
        "max_group_attempt_ms": {r: milliseconds(v)[1] for r, v in sorted(stats.by_result.items())},
        **figures,
    }
    # Every node is full and every victim frees ``fill.cpu_milli``: no plan evicts
    # fewer pods than this (the minimum itself when enough victims are single pods).
    demand = shape.pods * to_milli(args.cpu or f"{fill.cpu_milli}m")
    figures["victims_lower_bound"] = -(-demand // fill.cpu_milli)
    if minimum:
        best = figures["minimum"]
        complete = figures["groups_scheduled"] == shape.gangs
        figures["excess_pct"] = (
            round(100.0 * (figures["victims"] - best) / best, 1) if best and complete else None
        )
    return figures


async def _main(args: argparse.Namespace, emit: Callable[[str], None]) -> dict[str, Any]:
    if args.minimum:
        fill = Fill(
            args.min_nodes, args.min_zones, args.min_racks, args.min_pods_per_node, args.gang_share
        )
        shapes, timeout = args.min_shapes, args.min_timeout
    else:
        fill = Fill(args.nodes, args.zones, args.racks, args.pods_per_node, args.gang_share)
        shapes, timeout = args.shapes, args.timeout
    emit(
        f"fill: {fill.nodes} nodes, {fill.pods} low-priority pods of {fill.cpu_milli}m "
        f"({fill.gangs} `all` gangs of {VICTIM_GANG_SIZE}, "
        f"{fill.pods - fill.gangs * VICTIM_GANG_SIZE} single)"
    )
    result: dict[str, Any] = {}
    for shape in shapes:
        result[shape.name] = await run_one(shape, fill, args, timeout, args.minimum)
        emit(f"{shape.name}: {json.dumps(result[shape.name])}")
    return result


def summary(result: dict[str, Any]) -> list[str]:
    lines = []
    for name, f in result.items():
        line = (
            f"{name}: {f['pods_bound']}/{f['pods']} pods bound"
            f"{' (timed out)' if f['timed_out'] else ''}, {f['victims']} victims "
            f"({f['victims_single']} single, {f['victims_gang_members']} gang members, "
            f"{f['partly_evicted_gangs']} gangs partly evicted: must be 0), "
            f"{f['decisions']} decisions, max {f['max_decision_ms']} ms"
        )
        if "minimum" in f:
            line += f"; minimum {f['minimum']}, excess {f['excess_pct']}% "
            line += f"(goal <= {GOAL_EXCESS_PCT:g}%)"
        lines.append(line)
        if parse_shape(name).size >= GOAL_GANG_SIZE and "minimum" not in f:
            lines.append(
                f"  slowest decision {f['max_decision_ms']} ms "
                f"(goal < {GOAL_DECISION_S * 1000:g} ms)"
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
