"""``troupe explain pod NS/NAME`` and ``troupe explain podgroup NS/NAME``: why a pod or
gang is not scheduled, and what would change that.

A thin command over the what-if engine (``troupe.whatif``). By default the diagnosis
is the running scheduler's own, of its last attempt, read from
``/debug/troupe/explain`` on its metrics port (``--server``, bearer token from
``--token-file``: the shared debug token, or the caller's own when the scheduler
delegates authentication and authorization to the API server). ``--offline``
recomputes it without a scheduler: the cluster's objects are read and one attempt is
run in an embedded cluster with the same profile (``--config``), binding nothing in
the real cluster (``troupe.whatif.attempt``).

Either way the command then reads the cluster (``troupe.whatif.read``) to show per node
(or topology domain) what is free against what a member requests
(``troupe.whatif.fit``), and proposes fixes, each checked first by running the
scheduler on a modified copy of the state (``troupe.whatif.fixes``). The text output
lives in ``troupe.cli.explain_render``. See docs/explain.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from troupe.api.config import ConfigError, ResolvedConfig
from troupe.cli.explain_render import ExplainReport, render
from troupe.cli.profile import load_profile
from troupe.kube.debug import DebugEndpointError, fetch_explanation
from troupe.scheduler.service.logs import configure_logging
from troupe.whatif.attempt import Trial, attempt
from troupe.whatif.buy import domain_limit
from troupe.whatif.diagnosis import Diagnosis, parse_diagnosis
from troupe.whatif.errors import WhatIfError
from troupe.whatif.fit import ask_of, capacity
from troupe.whatif.fixes import find_fixes
from troupe.whatif.read import ClusterAddress, read_cluster
from troupe.whatif.state import ClusterState, Target

DEFAULT_SERVER = "http://127.0.0.1:10259"


class ExplainError(RuntimeError):
    """A flag that is missing or wrong."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", choices=["pod", "podgroup"], help="what to explain")
    p.add_argument(
        "target",
        help="NS/NAME (a Workload's gang: NS/WORKLOAD/PODGROUP[/REPLICA])",
    )
    p.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: in-cluster)")
    p.add_argument("--master", default=None, help="API server URL, overrides the kubeconfig")
    p.add_argument(
        "--server",
        default=os.environ.get("TROUPE_SERVER", DEFAULT_SERVER),
        help=f"the scheduler's metrics address (default {DEFAULT_SERVER}, or $TROUPE_SERVER)",
    )
    p.add_argument(
        "--token-file",
        default=None,
        help="the bearer token to send: the scheduler's --debug-token-file, or with "
        "--debug-auth=delegated the caller's own token (docs/explain.md)",
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="recompute the diagnosis from the cluster's objects, without the scheduler",
    )
    p.add_argument("--config", default=None, help="the scheduler's KubeSchedulerConfiguration")
    p.add_argument("--no-fixes", action="store_true", help="do not look for fixes")
    p.add_argument(
        "--all",
        action="store_true",
        dest="show_all",
        help="list every node and domain in the capacity section (default: the closest)",
    )
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")


def main(args: argparse.Namespace) -> int:
    configure_logging("error")
    try:
        target = Target.parse(args.kind, args.target)
        config = _config(args.config)
        token = "" if args.offline else _token(args.token_file)
        report = asyncio.run(explain(target, config, args, token))
    except (ExplainError, WhatIfError, DebugEndpointError, OSError) as exc:
        print(f"troupe explain: {exc}", file=sys.stderr)
        return 3 if isinstance(exc, DebugEndpointError) and exc.status in (401, 403) else 1
    if args.output == "json":
        print(json.dumps(report.to_json(), indent=2, default=str))
    else:
        print(render(report))
    return 0


def _token(path: str | None) -> str:
    if not path:
        raise ExplainError("--token-file is required to ask the scheduler (or --offline)")
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def _config(path: str | None) -> ResolvedConfig:
    try:
        return load_profile(path)
    except ConfigError as exc:
        raise ExplainError("invalid configuration: " + "; ".join(exc.problems)) from exc


def _address(args: argparse.Namespace) -> ClusterAddress:
    """--kubeconfig or --master; without either, in-cluster credentials when
    ``KUBERNETES_SERVICE_HOST`` is set, else ``$KUBECONFIG`` or ``~/.kube/config``."""
    kubeconfig = args.kubeconfig
    in_cluster = kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ
    if kubeconfig is None and not in_cluster:
        kubeconfig = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    return ClusterAddress(kubeconfig, args.master, in_cluster=in_cluster)


async def explain(
    target: Target, config: ResolvedConfig, args: argparse.Namespace, token: str
) -> ExplainReport:
    state = ClusterState(await read_cluster(_address(args)))
    report = ExplainReport(target, "offline" if args.offline else "scheduler")
    report.show_all = args.show_all
    diagnosis: Diagnosis | None
    if args.offline:
        tried = await attempt(config, state, target)
        report.would_bind = tried.nodes if tried.bound else None
        diagnosis = tried.diagnosis
    else:
        record = await fetch_explanation(
            args.server, token, target.kind, target.namespace, target.name, target.sub
        )
        diagnosis = parse_diagnosis(record) if record is not None else None
    if diagnosis is None:
        return report
    report.diagnosis = diagnosis
    ask = ask_of(state, target, diagnosis)
    report.capacity = capacity(state, ask, unlabelled=args.show_all)
    report.capacity["limit"] = domain_limit(state, target, ask)
    if not args.no_fixes:
        report.fixes = await find_fixes(Trial(config, target), state, diagnosis, ask)
    return report
