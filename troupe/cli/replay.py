"""``troupe replay FILE``: troupe scheduling a ``troupe snapshot`` offline.

Loads the snapshot into a fresh embedded cluster in this process (``SimCluster``
with no nodes of its own; ``troupe.sim.replay``), applies the what-if changes
(``--add-nodes N --node-template NODE.yaml``, ``--remove-nodes SELECTOR``,
``--add MANIFEST.yaml``), starts a troupe daemon with ``--config`` (troupe's default
configuration when unset or ``default``) against it over HTTP, waits until the
scheduler is idle and reports what bound where, what stays pending and why, the
gangs, and utilisation. ``--compare A B`` runs the replay once per configuration, each
on a fresh copy of the cluster, and prints both outcomes side by side.
``--report FILE.html`` also writes an HTML page of the run(s) (``troupe.sim.report``).
docs/replay.md.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from troupe.api.config import (
    ConfigError,
    ResolvedConfig,
    config_document,
    load_config,
    load_config_file,
)
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.scheduler.service.logs import configure_logging
from troupe.sim import replay, report
from troupe.sim.cluster import SimCluster
from troupe.sim.snapshot_file import Snapshot, SnapshotError, read_snapshot

SETTLE_SECONDS = 0.5


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a troupe snapshot (troupe snapshot -o FILE)")
    p.add_argument("--config", default=None, help="scheduler configuration (default: troupe's)")
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("PROFILE_A", "PROFILE_B"),
        default=None,
        help="replay with two configurations ('default': troupe's) and compare",
    )
    p.add_argument("--add-nodes", type=int, default=0, metavar="N", help="add N nodes")
    p.add_argument("--node-template", default=None, help="Node YAML cloned by --add-nodes")
    p.add_argument("--remove-nodes", default=None, metavar="SELECTOR", help="label selector")
    p.add_argument(
        "--add", action="append", default=[], metavar="MANIFEST", help="create more objects"
    )
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")
    p.add_argument(
        "--report",
        default=None,
        metavar="FILE.html",
        help="also write an HTML report of the replay (self-contained)",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for idle")
    p.add_argument("--log-level", default="error", choices=["debug", "info", "warning", "error"])
    p.set_defaults(replay_parser=p)


@dataclass(slots=True)
class Changes:
    template: dict[str, Any] | None
    add_nodes: int
    remove_selector: str | None
    added: list[dict[str, Any]]


@dataclass(slots=True)
class Run:
    profile: str
    outcome: replay.Outcome
    nodes: int
    settled: bool
    seconds: float


def _config(path: str | None) -> ResolvedConfig:
    cat = catalog(default_registry())
    return load_config_file(path, cat) if path else load_config(config_document(), cat)


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    if not rows:
        return ["(none)"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*headers), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in rows]
    return [line.rstrip() for line in lines]


def _yaml_docs(path: str) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
    except (OSError, yaml.YAMLError) as exc:
        raise SnapshotError(f"{path}: {exc}") from exc
    out: list[dict[str, Any]] = []
    for doc in docs:
        if not isinstance(doc, dict):
            raise SnapshotError(f"{path}: every document must be an object")
        if doc.get("kind") == "List":
            out.extend(doc.get("items") or [])
        else:
            out.append(doc)
    return out


def main(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.replay_parser
    if args.add_nodes and not args.node_template:
        parser.error("--add-nodes needs --node-template NODE.yaml")
    if args.compare and args.config:
        parser.error("--compare names both configurations: not with --config")
    configure_logging(args.log_level, fmt="console")
    profiles = list(args.compare) if args.compare else [args.config or "default"]
    try:
        snapshot = read_snapshot(args.file)
        configs = [_config(None if p == "default" else p) for p in profiles]
        template = None
        if args.node_template:
            nodes = _yaml_docs(args.node_template)
            if len(nodes) != 1 or nodes[0].get("kind", "Node") != "Node":
                raise SnapshotError(f"{args.node_template}: expected one Node")
            template = nodes[0]
        added = [doc for path in args.add for doc in _yaml_docs(path)]
    except (ConfigError, SnapshotError) as exc:
        print(f"troupe replay: {exc}", file=sys.stderr)
        return 1
    changes = Changes(template, args.add_nodes, args.remove_nodes, added)
    import uvloop

    runs: list[Run] = []
    try:
        for profile, config in zip(profiles, configs, strict=True):
            label = profile if profile == "default" else Path(profile).stem
            runs.append(uvloop.run(_replay(snapshot, config, label, changes, args.timeout)))
    except replay.ReplayError as exc:
        print(f"troupe replay: {exc}", file=sys.stderr)
        return 1
    for run in runs:
        if not run.settled:
            print(
                f"troupe replay: {run.profile}: the scheduler was not idle after "
                f"{args.timeout:g}s; reporting the state then",
                file=sys.stderr,
            )
    if args.output == "json":
        if len(runs) == 1:
            print(json.dumps(runs[0].outcome.to_json(), indent=2))
        else:
            doc = {"compare": [{"profile": r.profile, **r.outcome.to_json()} for r in runs]}
            print(json.dumps(doc, indent=2))
    else:
        header = f"Replay of {args.file}"
        if snapshot.taken_at:
            header += f" (taken {snapshot.taken_at}"
            header += f", server {snapshot.server_version})" if snapshot.server_version else ")"
        print(header)
        print(render(runs[0]) if len(runs) == 1 else render_compare(runs[0], runs[1]))
    if args.report:
        try:
            out = report.write(
                args.report,
                f"troupe replay {Path(args.file).name}",
                "replay",
                [report.replay_run(r.profile, r.outcome, r.seconds) for r in runs],
            )
        except OSError as exc:
            print(f"troupe replay: cannot write the report: {exc}", file=sys.stderr)
            return 1
        print(f"troupe replay: wrote the report {out}", file=sys.stderr)
    return 0


async def _replay(
    snapshot: Snapshot, config: ResolvedConfig, profile: str, changes: Changes, timeout: float
) -> Run:
    names = {p.scheduler_name for p in config.profiles}
    # One scheduler, offline: nobody to elect a leader against.
    config = dataclasses.replace(
        config, leader_election=config.leader_election.model_copy(update={"leader_elect": False})
    )
    async with SimCluster(heartbeat=None) as cluster:
        replay.load_snapshot(cluster, snapshot)
        if changes.remove_selector:
            replay.remove_nodes(cluster, changes.remove_selector)
        if changes.template is not None and changes.add_nodes:
            replay.add_nodes(cluster, changes.template, changes.add_nodes)
        if changes.added:
            replay.add_objects(cluster, changes.added)
        keys = replay.to_schedule(cluster, names)
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = cluster.write_kubeconfig(Path(tmp) / "kubeconfig")
            daemon = SchedulerDaemon(
                config, Connection(kubeconfig=str(kubeconfig)), seed=1, sync_timeout=30
            )
            # When each pod to schedule is bound (the report's gang timeline).
            bound_at: dict[str, float] = {}
            wanted = set(keys)

            def on_pod(_: str, pod: dict[str, Any]) -> None:
                name = replay.key(pod)
                if name in wanted and name not in bound_at and pod["spec"].get("nodeName"):
                    bound_at[name] = time.monotonic() - start

            start = time.monotonic()
            stop_listening = cluster.store.listen("pods", on_pod)
            await daemon.start()
            try:
                settled = await wait_idle(cluster, daemon, set(keys), timeout)
                result = replay.outcome(cluster, keys, bound_at)
            finally:
                stop_listening()
                await daemon.stop(grace=1)
        return Run(profile, result, len(cluster.node_names), settled, time.monotonic() - start)


def fingerprint(
    cluster: SimCluster, daemon: SchedulerDaemon, keys: set[str]
) -> tuple[Any, ...] | None:
    """The state of the pods to schedule when the scheduler is idle (nothing queued,
    in flight or binding; every pod either bound and cached or told why it is
    pending), else None."""
    s = daemon.scheduler
    if s is None:
        return None
    counts = s.queue.pending_counts()
    if counts["active"] or counts["backoff"] or s.queue.in_flight() or len(s.bindings):
        return None
    if s.cache.assumed_count:
        return None
    state = []
    for pod in cluster.store.list("pods", copy=False):
        key = replay.key(pod)
        node = pod["spec"].get("nodeName") or ""
        if node and key not in s.cache:
            return None  # a binding the cache has not seen yet
        if key not in keys:
            continue
        told = any(
            c.get("type") == "PodScheduled" for c in pod.get("status", {}).get("conditions", [])
        )
        if not node and not told:
            return None
        state.append((key, node))
    return (tuple(sorted(state)), tuple(sorted(counts.items())))


async def wait_idle(
    cluster: SimCluster, daemon: SchedulerDaemon, keys: set[str], timeout: float
) -> bool:
    """Wait until the scheduler has been idle, the state unchanged, for
    ``SETTLE_SECONDS``; False at ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: tuple[Any, ...] | None = None
    stable_since = loop.time()
    while loop.time() < deadline:
        now = fingerprint(cluster, daemon, keys)
        if now is None or now != last:
            last, stable_since = now, loop.time()
        elif loop.time() - stable_since >= SETTLE_SECONDS:
            return True
        await asyncio.sleep(0.02)
    return False


def _gang_rows(outcome: replay.Outcome) -> list[list[str]]:
    return [
        [
            g["namespace"],
            g["name"],
            g["api"],
            str(g["minCount"]),
            str(g["bound"]),
            "bound" if g["minCount"] and g["bound"] >= g["minCount"] else "pending",
        ]
        for g in outcome.gangs
    ]


def render(run: Run) -> str:
    o = run.outcome
    placed = [p for p in o.pods if p["node"]]
    lines = [
        f"Profile {run.profile}: {len(placed)} of {len(o.pods)} pods placed on "
        f"{run.nodes} node{'' if run.nodes == 1 else 's'} ({run.seconds:.1f}s)",
        "",
        "Placed:",
        *table(
            ["namespace", "pod", "node"], [[p["namespace"], p["name"], p["node"]] for p in placed]
        ),
        "",
        "Pending:",
        *table(
            ["namespace", "pod", "reason"],
            [[p["namespace"], p["name"], p["reason"]] for p in o.pending],
        ),
        "",
        "Gangs:",
        *table(["namespace", "gang", "api", "minCount", "bound", "state"], _gang_rows(o)),
        "",
        "Utilisation:",
        *table(
            ["resource", "requested", "allocatable", "used", "largest free"],
            [
                [r, u["requested"], u["allocatable"], f"{u['percent']}%", o.fragmentation[r]]
                for r, u in o.utilisation.items()
            ],
        ),
    ]
    return "\n".join(lines)


def render_compare(a: Run, b: Run) -> str:
    oa, ob = a.outcome, b.outcome

    def placed(o: replay.Outcome) -> str:
        return f"{sum(1 for p in o.pods if p['node'])}/{len(o.pods)}"

    def gangs_bound(o: replay.Outcome) -> str:
        n = sum(1 for g in o.gangs if g["minCount"] and g["bound"] >= g["minCount"])
        return f"{n}/{len(o.gangs)}"

    rows = [
        ["pods placed", placed(oa), placed(ob)],
        ["gangs bound", gangs_bound(oa), gangs_bound(ob)],
    ]
    for r in sorted(set(oa.utilisation) | set(ob.utilisation)):
        ua, ub = oa.utilisation.get(r), ob.utilisation.get(r)
        rows.append(
            [f"{r} used", f"{ua['percent']}%" if ua else "-", f"{ub['percent']}%" if ub else "-"]
        )
    for r in sorted(set(oa.fragmentation) | set(ob.fragmentation)):
        rows.append(
            [f"{r} largest free", oa.fragmentation.get(r, "-"), ob.fragmentation.get(r, "-")]
        )
    node_b = {(p["namespace"], p["name"]): p["node"] for p in ob.pods}
    pods = [
        [
            p["namespace"],
            p["name"],
            p["node"] or "-",
            node_b.get((p["namespace"], p["name"])) or "-",
        ]
        for p in oa.pods
    ]
    gangs_b = {(g["namespace"], g["name"], g["api"]): g["bound"] for g in ob.gangs}
    gangs = [
        [
            g["namespace"],
            g["name"],
            str(g["minCount"]),
            str(g["bound"]),
            str(gangs_b.get((g["namespace"], g["name"], g["api"]), "-")),
        ]
        for g in oa.gangs
    ]
    reasons = [
        [run.profile, p["namespace"], p["name"], p["reason"]]
        for run in (a, b)
        for p in run.outcome.pending
    ]
    lines = [
        f"Compare {a.profile} vs {b.profile}:",
        *table(["", a.profile, b.profile], rows),
        "",
        "Pods:",
        *table(["namespace", "pod", a.profile, b.profile], pods),
        "",
        "Gangs (members bound):",
        *table(["namespace", "gang", "minCount", a.profile, b.profile], gangs),
        "",
        "Pending reasons:",
        *table(["profile", "namespace", "pod", "reason"], reasons),
    ]
    return "\n".join(lines)
