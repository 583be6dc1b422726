"""``troupe replay FILE``: troupe scheduling a ``troupe snapshot`` offline.

A thin command over the what-if engine (``troupe.whatif.replay``): it reads the
snapshot, the configuration(s) and the what-if changes (``--add-nodes N
--node-template NODE.yaml``, ``--remove-nodes SELECTOR``, ``--add MANIFEST.yaml``),
replays once per configuration (``--config``, troupe's default configuration when
unset or ``default``; ``--compare A B``: twice, each on a fresh copy of the cluster)
and prints what bound where, what stays pending and why, the gangs and utilisation
(``troupe.cli.replay_render``), one outcome or both side by side. ``--report
FILE.html`` also writes an HTML page of the run(s) (``troupe.sim.report``).
docs/replay.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from troupe.api.config import ConfigError, ResolvedConfig
from troupe.cli.profile import load_profile
from troupe.cli.replay_render import render, render_compare
from troupe.scheduler.service.logs import configure_logging
from troupe.sim import report
from troupe.sim.snapshot_file import Snapshot, SnapshotError, read_snapshot
from troupe.whatif.errors import WhatIfError
from troupe.whatif.replay import Changes, Run, replay


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


@dataclass(frozen=True, slots=True)
class Inputs:
    snapshot: Snapshot
    profiles: list[tuple[str, ResolvedConfig]]  # (label, configuration)
    changes: Changes


def _inputs(args: argparse.Namespace) -> Inputs:
    """The snapshot, the labelled configurations and the changes the flags name."""
    names = list(args.compare) if args.compare else [args.config or "default"]
    snapshot = read_snapshot(args.file)
    profiles = [
        (p if p == "default" else Path(p).stem, load_profile(None if p == "default" else p))
        for p in names
    ]
    template = None
    if args.node_template:
        nodes = _yaml_docs(args.node_template)
        if len(nodes) != 1 or nodes[0].get("kind", "Node") != "Node":
            raise SnapshotError(f"{args.node_template}: expected one Node")
        template = nodes[0]
    added = [doc for path in args.add for doc in _yaml_docs(path)]
    changes = Changes(args.remove_nodes, template, args.add_nodes, added)
    return Inputs(snapshot, profiles, changes)


def main(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.replay_parser
    if args.add_nodes and not args.node_template:
        parser.error("--add-nodes needs --node-template NODE.yaml")
    if args.compare and args.config:
        parser.error("--compare names both configurations: not with --config")
    configure_logging(args.log_level, fmt="console")
    import uvloop

    try:
        inputs = _inputs(args)
        runs = [
            uvloop.run(replay(inputs.snapshot, config, label, inputs.changes, args.timeout))
            for label, config in inputs.profiles
        ]
    except (ConfigError, SnapshotError, WhatIfError) as exc:
        print(f"troupe replay: {exc}", file=sys.stderr)
        return 1
    for run in runs:
        if not run.settled:
            print(
                f"troupe replay: {run.profile}: the scheduler was not idle after "
                f"{args.timeout:g}s; reporting the state then",
                file=sys.stderr,
            )
    _print(args, inputs.snapshot, runs)
    return _write_report(args.report, args.file, runs) if args.report else 0


def _print(args: argparse.Namespace, snapshot: Snapshot, runs: list[Run]) -> None:
    if args.output == "json":
        if len(runs) == 1:
            print(json.dumps(runs[0].outcome.to_json(), indent=2))
        else:
            doc = {"compare": [{"profile": r.profile, **r.outcome.to_json()} for r in runs]}
            print(json.dumps(doc, indent=2))
        return
    header = f"Replay of {args.file}"
    if snapshot.taken_at:
        header += f" (taken {snapshot.taken_at}"
        header += f", server {snapshot.server_version})" if snapshot.server_version else ")"
    print(header)
    print(render(runs[0]) if len(runs) == 1 else render_compare(runs[0], runs[1]))


def _write_report(path: str, snapshot_file: str, runs: list[Run]) -> int:
    try:
        out = report.write(
            path,
            f"troupe replay {Path(snapshot_file).name}",
            "replay",
            [report.replay_run(r.profile, r.outcome, r.seconds) for r in runs],
        )
    except OSError as exc:
        print(f"troupe replay: cannot write the report: {exc}", file=sys.stderr)
        return 1
    print(f"troupe replay: wrote the report {out}", file=sys.stderr)
    return 0
