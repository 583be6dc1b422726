"""troupe and another scheduler binary side by side, on the same workloads.

``python -m bench peer --scheduler-cmd "PATH --config {config}" [--scheduler-name NAME]
[--profile FILE] [--nodes 100] [--pods 5000] [--gang-shapes 1000x5,5x1000] [--quick]``

Every workload runs once per side, each on a fresh embedded API server in its own
process (``bench.server``), on ``--nodes`` simulated nodes (4 CPU, 32Gi, 110 pods):

- ``plain``: ``--pods`` pods (50m / 500Mi);
- ``<G>x<S>`` (``--gang-shapes``): G scheduler-plugins PodGroups (``minMember`` S), S
  member pods each (50m / 128Mi), the PodGroup CRD installed.

The workload exists before the scheduler starts (a backlog), then the scheduler is
started as a process of its own: troupe as ``python -m troupe run --config F`` (its
default profile, which schedules a PodGroup as one entity), the peer as
``--scheduler-cmd`` with ``{config}`` replaced by a KubeSchedulerConfiguration the
bench writes: the kubeconfig, ``contentType: application/json`` (the embedded server
speaks no protobuf), ``leaderElect: false``, client qps and burst raised to ``--qps``
(kube-scheduler's default 50 would cap the bindings at 50/s; troupe gets the same
limit) and one profile: ``schedulerName: NAME`` plus the mapping in ``--profile FILE``
(plugins, pluginConfig; a whole KubeSchedulerConfiguration's first profile also
works). The pods carry ``schedulerName: NAME`` for the peer, ``troupe-scheduler`` for
troupe. ``bench/profiles/`` holds two profiles for kube-scheduler v1.30 with
scheduler-plugins: ``kube-scheduler-no-volumes.yaml`` and ``coscheduling-no-volumes.yaml``
(both disable the volume plugins and PodTopologySpread's system default constraints,
whose informers wait for kinds the embedded server may not serve).

The bench watches the pods over HTTP and reads the scheduler's ``/proc`` entries:

- ``drain_seconds``: from starting the scheduler process to the backlog's last binding
  (start-up and cache sync included); ``startup_seconds`` (``start s``) from exec to the
  first binding: imports, profile, connection, cache sync and the first cycle;
- ``pods_per_second``: the backlog ÷ first to last binding;
- ``cpu_seconds`` and ``cpu_ms_per_pod``: the scheduler process's user + system CPU
  (``/proc/<pid>/stat``) from its start to the backlog drained, and that ÷ the backlog
  (the API server is shared, so CPU per pod is the figure that compares);
  ``burst_cpu_ms_per_pod`` the same from the first binding on (start-up, imports and
  cache sync left out; sampled every 20 ms);
- ``p99_create_to_bind_ms``: then ``--live-pods`` more pods (whole gangs for a gang
  workload, ``ceil(live / S)`` of them) are created over HTTP at ``--live-rate`` pods/s
  while the scheduler runs: the 99th percentile of the time from the create request's
  answer to the binding seen on the watch;
- ``peak_rss_mb``: the scheduler process's ``VmHWM`` (``/proc/<pid>/status``) at the end.

A run still short of its pods after ``--timeout`` seconds is stopped and reported with
``timed_out``. Without a usable binary (``--scheduler-cmd`` and ``$TROUPE_PEER_SCHEDULER``
unset, or its program missing or not executable) the bench exits 2 and says how to get
one (docs/benchmarks.md, "bench peer"). ``--sides troupe`` measures troupe alone.
The last line of output is one JSON object: workload -> side -> figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import yaml
from troupe.api.gangs import POD_GROUP_LABEL

from bench.server import NAMESPACE, ServerProcess, pod, pod_group

TROUPE_NAME = "troupe-scheduler"
PEER_ENV = "TROUPE_PEER_SCHEDULER"
PROFILES = Path(__file__).resolve().parent / "profiles"
POD_CPU = "50m"
SIDES = ("troupe", "peer")
HOW_TO_GET_ONE = (
    "bench peer needs a scheduler binary: pass --scheduler-cmd 'PATH --config {config}' "
    f"or set {PEER_ENV}=PATH. To build kube-scheduler v1.30 with scheduler-plugins' "
    "Coscheduling offline, follow docs/benchmarks.md, section "
    '"bench peer: troupe and kube-scheduler side by side".'
)


@dataclass(frozen=True, slots=True)
class Workload:
    """``plain`` (gangs == 0: ``size`` single pods) or ``gangs`` PodGroups of ``size``."""

    gangs: int
    size: int

    @property
    def name(self) -> str:
        return f"{self.gangs}x{self.size}" if self.gangs else "plain"

    @property
    def pods(self) -> int:
        return self.gangs * self.size if self.gangs else self.size

    def server_argv(self) -> list[str]:
        if not self.gangs:
            return ["--pods", str(self.size), "--pod-cpu", POD_CPU]
        return ["--gangs", str(self.gangs), "--gang-size", str(self.size), "--gang-cpu", POD_CPU]


def parse_shapes(text: str) -> list[tuple[int, int]]:
    shapes = []
    for name in filter(None, (t.strip() for t in text.split(","))):
        gangs, sep, size = name.partition("x")
        if not (sep and gangs.isdigit() and size.isdigit() and int(gangs) and int(size)):
            raise argparse.ArgumentTypeError(f"shape {name!r}: expected <gangs>x<pods per gang>")
        shapes.append((int(gangs), int(size)))
    return shapes


def parse_sides(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",")]
    unknown = [s for s in names if s not in SIDES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown side(s) {unknown}; known: {SIDES}")
    return names


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scheduler-cmd",
        default="",
        help="the peer's command line, {config} replaced by the configuration file "
        f"(default: ${PEER_ENV} --config {{config}})",
    )
    p.add_argument("--scheduler-name", default="default-scheduler", help="the peer's profile")
    p.add_argument(
        "--profile",
        default=str(PROFILES / "coscheduling-no-volumes.yaml"),
        help="YAML mapping: the peer profile's plugins and pluginConfig",
    )
    p.add_argument("--nodes", type=int, default=None, help="default 100 (--quick: 10)")
    p.add_argument("--pods", type=int, default=None, help="plain pods (default 5000; 0: none)")
    p.add_argument(
        "--gang-shapes",
        type=parse_shapes,
        default=None,
        help="GxS,... (default 1000x5,5x1000; empty: none)",
    )
    p.add_argument("--live-pods", type=int, default=None, help="default 500 (--quick: 40)")
    p.add_argument("--live-rate", type=float, default=100.0, help="live pods created per second")
    p.add_argument("--sides", type=parse_sides, default=",".join(SIDES))
    p.add_argument("--qps", type=float, default=100_000.0, help="client limit of both sides")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per phase")
    p.add_argument("--quick", action="store_true", help="a small smoke run")
    p.add_argument("--keep-logs", default="", help="copy the schedulers' logs to this directory")


def resolve_defaults(args: argparse.Namespace) -> None:
    quick = args.quick
    if args.nodes is None:
        args.nodes = 10 if quick else 100
    if args.pods is None:
        args.pods = 200 if quick else 5000
    if args.gang_shapes is None:
        args.gang_shapes = [(20, 5), (2, 50)] if quick else [(1000, 5), (5, 1000)]
    if args.live_pods is None:
        args.live_pods = 40 if quick else 500


def workloads(args: argparse.Namespace) -> list[Workload]:
    out = [Workload(0, args.pods)] if args.pods else []
    return out + [Workload(g, s) for g, s in args.gang_shapes]


def peer_argv(args: argparse.Namespace) -> list[str] | None:
    """The peer's command line with ``{config}`` still in it, or None when there is no
    usable program."""
    text = args.scheduler_cmd
    if not text:
        binary = os.environ.get(PEER_ENV, "")
        text = f"{shlex.quote(binary)} --config {{config}}" if binary else ""
    argv = shlex.split(text)
    if not argv:
        return None
    program = shutil.which(argv[0])
    if program is None:
        return None
    return [program, *argv[1:]]


def load_profile(path: str) -> dict[str, Any]:
    doc = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a mapping")
    if "profiles" in doc:
        doc = doc["profiles"][0]
    return {k: v for k, v in doc.items() if k != "schedulerName"}


def scheduler_config(
    kubeconfig: Path, name: str, qps: float, profile: dict[str, Any] | None
) -> dict[str, Any]:
    """A KubeSchedulerConfiguration both kube-scheduler and troupe read."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {
            "kubeconfig": str(kubeconfig),
            "contentType": "application/json",
            "qps": qps,
            "burst": int(qps),
        },
        "profiles": [{"schedulerName": name, **(profile or {})}],
    }


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far (0.0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def sample_cpu(pid: int, samples: list[tuple[float, float]]) -> None:
    """Append (time, CPU seconds) of the process every 20 ms until cancelled."""
    while True:
        samples.append((time.perf_counter(), proc_cpu_seconds(pid)))
        await asyncio.sleep(0.02)


def proc_peak_rss_mb(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Bindings:
    """Watches the bench namespace's pods; remembers when each was first seen bound."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session, self.url = session, url
        self.bound: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    async def start(self) -> None:
        pods_url = f"{self.url}/api/v1/namespaces/{NAMESPACE}/pods"
        async with self.session.get(pods_url) as resp:
            resp.raise_for_status()
            listed = await resp.json()
        now = time.perf_counter()
        for item in listed["items"]:
            if item["spec"].get("nodeName"):
                self.bound[item["metadata"]["name"]] = now
        rv = listed["metadata"]["resourceVersion"]
        resp = await self.session.get(
            pods_url,
            params={"watch": "true", "resourceVersion": rv},
            timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
        )
        resp.raise_for_status()
        self._task = asyncio.create_task(self._read(resp))

    async def _read(self, resp: aiohttp.ClientResponse) -> None:
        async with resp:
            async for line in resp.content:
                event = json.loads(line)
                obj = event["object"]
                name = obj.get("metadata", {}).get("name")
                if obj.get("spec", {}).get("nodeName") and name not in self.bound:
                    self.bound[name] = time.perf_counter()
                    self._changed.set()

    async def wait_for(self, names: set[str], deadline: float) -> bool:
        while not names.issubset(self.bound.keys()):
            if self._task is not None and self._task.done():
                raise RuntimeError("the pod watch ended")
            left = deadline - time.perf_counter()
            if left <= 0:
                return False
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 1.0))
        return True

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def backlog_names(w: Workload) -> set[str]:
    if not w.gangs:
        return {f"pod-{i}" for i in range(w.size)}
    return {f"gang-{g:04d}-{i:04d}" for g in range(w.gangs) for i in range(w.size)}


async def create_live(
    session: aiohttp.ClientSession,
    url: str,
    w: Workload,
    live_pods: int,
    rate: float,
    scheduler_name: str,
) -> dict[str, float]:
    """Create the live pods (whole gangs for a gang workload) at ``rate`` pods/s;
    name -> when its create was answered."""
    base = f"{url}/api/v1/namespaces/{NAMESPACE}/pods"
    groups = f"{url}/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NAMESPACE}/podgroups"
    specs: list[dict[str, Any]] = []
    if w.gangs:
        for g in range(max(1, math.ceil(live_pods / w.size))):
            name = f"live-gang-{g:04d}"
            async with session.post(groups, json=pod_group(name, w.size)) as resp:
                resp.raise_for_status()
            specs += [
                pod(
                    f"{name}-{i:04d}",
                    cpu=POD_CPU,
                    memory="128Mi",
                    labels={POD_GROUP_LABEL: name},
                    scheduler_name=scheduler_name,
                )
                for i in range(w.size)
            ]
    else:
        specs = [
            pod(f"live-{i}", cpu=POD_CPU, scheduler_name=scheduler_name) for i in range(live_pods)
        ]
    created: dict[str, float] = {}
    start = time.perf_counter()
    for i, spec in enumerate(specs):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        async with session.post(base, json=spec) as resp:
            resp.raise_for_status()
        created[spec["metadata"]["name"]] = time.perf_counter()
    return created


async def stop_process(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def server_url(kubeconfig: Path) -> str:
    doc = yaml.safe_load(kubeconfig.read_text())
    return str(doc["clusters"][0]["cluster"]["server"]).rstrip("/")


async def run_side(
    side: str,
    w: Workload,
    args: argparse.Namespace,
    peer: list[str],
    profile: dict[str, Any] | None,
    tmp: Path,
) -> dict[str, Any]:
    name = TROUPE_NAME if side == "troupe" else args.scheduler_name
    kubeconfig = tmp / f"{w.name}-{side}.kubeconfig"
    config_path = tmp / f"{w.name}-{side}.yaml"
    config = scheduler_config(kubeconfig, name, args.qps, None if side == "troupe" else profile)
    config_path.write_text(yaml.safe_dump(config))
    if side == "troupe":
        argv = [sys.executable, "-m", "troupe", "run", "--config", str(config_path)]
        argv += ["--leader-elect=false", "--port", "0", "--log-level", "warning"]
    else:
        argv = [a.replace("{config}", str(config_path)) for a in peer]
    server_argv = ["--nodes", str(args.nodes), "--pod-group-crd", "--scheduler-name", name]
    log_path = tmp / f"{w.name}-{side}.log"
    async with (
        ServerProcess(server_argv + w.server_argv(), kubeconfig),
        aiohttp.ClientSession() as session,
    ):
        url = server_url(kubeconfig)
        watch = Bindings(session, url)
        await watch.start()
        names = backlog_names(w)
        with log_path.open("wb") as log:
            start = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log
            )
            samples: list[tuple[float, float]] = []
            sampler = asyncio.create_task(sample_cpu(proc.pid, samples))
            try:
                drained = await watch.wait_for(names, start + args.timeout)
                cpu = proc_cpu_seconds(proc.pid)
                sampler.cancel()
                times = [watch.bound[n] for n in names if n in watch.bound]
                figures: dict[str, Any] = {"pods": len(names), "bound": len(times)}
                if times and drained:
                    first, last = min(times), max(times)
                    figures |= {
                        "drain_seconds": round(last - start, 3),
                        "startup_seconds": round(first - start, 3),
                        "pods_per_second": round(len(names) / max(last - first, 1e-6), 1),
                        "cpu_seconds": round(cpu, 2),
                        "cpu_ms_per_pod": round(cpu / len(names) * 1e3, 3),
                    }
                    burst_cpu = cpu - max((c for t, c in samples if t <= first), default=0.0)
                    figures["burst_cpu_ms_per_pod"] = round(burst_cpu / len(names) * 1e3, 3)
                else:
                    figures["timed_out"] = True
                if drained and args.live_pods > 0:
                    created = await create_live(
                        session, url, w, args.live_pods, args.live_rate, name
                    )
                    live_done = await watch.wait_for(
                        set(created), time.perf_counter() + args.timeout
                    )
                    waits = [watch.bound[n] - t for n, t in created.items() if n in watch.bound]
                    figures["live_pods"] = len(created)
                    if live_done:
                        p99 = float(np.percentile(np.array(waits), 99)) * 1e3
                        figures["p99_create_to_bind_ms"] = round(p99, 1)
                    else:
                        figures["live_timed_out"] = True
                figures["peak_rss_mb"] = round(proc_peak_rss_mb(proc.pid), 1)
                if proc.returncode is not None:
                    figures["exit_code"] = proc.returncode
            finally:
                sampler.cancel()
                await stop_process(proc)
                await watch.stop()
    if args.keep_logs:
        Path(args.keep_logs).mkdir(parents=True, exist_ok=True)
        shutil.copy(log_path, Path(args.keep_logs) / log_path.name)
    if "timed_out" in figures or "live_timed_out" in figures:
        tail = log_path.read_bytes()[-2000:].decode(errors="replace")
        print(f"{side} on {w.name} timed out; its log ends:\n{tail}", file=sys.stderr)
    return figures


def row(workload: str, side: str, f: dict[str, Any]) -> str:
    def cell(key: str) -> str:
        return str(f.get(key, "-"))

    return (
        f"{workload:>10} {side:>7} {cell('startup_seconds'):>7} {cell('pods_per_second'):>9} "
        f"{cell('drain_seconds'):>8} {cell('p99_create_to_bind_ms'):>9} "
        f"{cell('cpu_ms_per_pod'):>10} {cell('peak_rss_mb'):>8}"
    )


async def _main(args: argparse.Namespace, peer: list[str]) -> dict[str, dict[str, Any]]:
    profile = load_profile(args.profile) if "peer" in args.sides else None
    results: dict[str, dict[str, Any]] = {}
    print(
        f"{'workload':>10} {'side':>7} {'start s':>7} {'pods/s':>9} {'drain s':>8} {'p99 ms':>9} "
        f"{'CPU ms/pod':>10} {'RSS MB':>8}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        for w in workloads(args):
            for side in args.sides:
                figures = await run_side(side, w, args, peer, profile, Path(tmp))
                results.setdefault(w.name, {})[side] = figures
                print(row(w.name, side, figures), flush=True)
    return results


def run(args: argparse.Namespace) -> int:
    resolve_defaults(args)
    peer: list[str] = []
    if "peer" in args.sides:
        found = peer_argv(args)
        if found is None:
            print(f"no scheduler binary: {HOW_TO_GET_ONE}", file=sys.stderr)
            return 2
        peer = found
        if not any("{config}" in a for a in peer):
            print("--scheduler-cmd must contain {config}", file=sys.stderr)
            return 2
    import uvloop

    results = uvloop.run(_main(args, peer))
    print(json.dumps(results))
    return 0
