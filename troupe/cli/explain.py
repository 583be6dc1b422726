"""``troupe explain pod NS/NAME`` and ``troupe explain podgroup NS/NAME``: why a pod or
gang is not scheduled, and what would change that.

By default the diagnosis is the running scheduler's own, of its last attempt, read
from ``/debug/troupe/explain`` on its metrics port (``--server``, bearer token from
``--token-file``: the shared debug token, or the caller's own when the scheduler
delegates authentication and authorization to the API server). ``--offline``
recomputes it without a scheduler: the cluster's objects are read and one attempt is
run in an embedded cluster with the same profile (``--config``), binding nothing in
the real cluster (``troupe.cli.explain_state``).

Either way the command then reads the cluster to show per node (or topology domain)
what is free against what a member requests, and proposes fixes, each checked first
by running the scheduler on a modified copy of the state: more nodes like the best
one, a lower minCount, or running pods moved out of one node or topology domain
(``troupe.cli.explain_free``). The capacity and text output live in
``troupe.cli.explain_capacity`` and ``troupe.cli.explain_render``. See docs/explain.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
from typing import Any

from troupe.api.config import (
    ConfigError,
    ResolvedConfig,
    config_document,
    load_config,
    load_config_file,
)
from troupe.api.objects import Node, Pod
from troupe.api.resources import node_allocatable
from troupe.cli.explain_capacity import (
    capacity,
    fits,
    member_request,
    needed,
    node_filter_note,
    representative,
)
from troupe.cli.explain_free import free_fixes
from troupe.cli.explain_render import render
from troupe.cli.explain_state import (
    ClusterState,
    ExplainError,
    Target,
    attempt,
    checked,
    read_cluster,
)
from troupe.kube.debug import DebugEndpointError, fetch_explanation
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.service.logs import configure_logging

Obj = dict[str, Any]
DEFAULT_SERVER = "http://127.0.0.1:10259"


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
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")


def main(args: argparse.Namespace) -> int:
    configure_logging("error")
    try:
        target = Target.parse(args.kind, args.target)
        config = _config(args.config)
        token = ""
        if not args.offline:
            if not args.token_file:
                raise ExplainError("--token-file is required to ask the scheduler (or --offline)")
            with open(args.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        report = asyncio.run(explain(target, config, args, token))
    except (ExplainError, DebugEndpointError, OSError) as exc:
        print(f"troupe explain: {exc}", file=sys.stderr)
        return 3 if isinstance(exc, DebugEndpointError) and exc.status in (401, 403) else 1
    if args.output == "json":
        print(json.dumps(report, indent=2, default=str))
    else:
        print(render(report))
    return 0


def _config(path: str | None) -> ResolvedConfig:
    cat = catalog(default_registry())
    try:
        return load_config_file(path, cat) if path else load_config(config_document(), cat)
    except ConfigError as exc:
        raise ExplainError("invalid configuration: " + "; ".join(exc.problems)) from exc


def _connection(args: argparse.Namespace) -> tuple[str | None, bool]:
    kubeconfig = args.kubeconfig
    in_cluster = kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ
    if kubeconfig is None and not in_cluster:
        kubeconfig = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    return kubeconfig, in_cluster


async def explain(
    target: Target, config: ResolvedConfig, args: argparse.Namespace, token: str
) -> dict[str, Any]:
    kubeconfig, in_cluster = _connection(args)
    state = await read_cluster(kubeconfig, args.master, in_cluster)
    report: dict[str, Any] = {"target": {"kind": target.kind, "name": target.display}}
    if args.offline:
        outcome = await attempt(config, state, target)
        report["source"] = "offline"
        if outcome.bound:
            report["diagnosis"] = None
            report["wouldBind"] = outcome.nodes
            return report
        diagnosis = outcome.diagnosis
    else:
        diagnosis = await fetch_explanation(
            args.server, token, target.kind, target.namespace, target.name, target.sub
        )
        report["source"] = "scheduler"
        if diagnosis is None:
            report["diagnosis"] = None
            return report
    assert diagnosis is not None
    diagnosis.pop("found", None)
    report["diagnosis"] = diagnosis
    request = member_request(diagnosis)
    levels = (diagnosis.get("topology") or {}).get("required") or ""
    pod = representative(state, target, diagnosis)
    report["capacity"] = capacity(state, request, needed(diagnosis), levels, pod)
    if not args.no_fixes:
        report["fixes"] = await fixes(config, state, target, diagnosis, request, pod)
    return report


# --- fixes ----------------------------------------------------------------------------


def _best_node(
    state: ClusterState, request: dict[str, int], diagnosis: dict[str, Any], pod: Pod | None
) -> str:
    """The node to clone: one a member fits on in this attempt when there is one (it
    passes every filter), else, of the nodes the member's filters allow, the one with
    the most room for a member when empty."""
    fits_on = [m.get("fitsOn") for m in diagnosis.get("members") or [] if m.get("fitsOn")]
    names = {n["metadata"]["name"]: n for n in state.nodes}
    if fits_on and fits_on[0] in names:
        return str(fits_on[0])
    best, room = "", -1
    for name, obj in sorted(names.items()):
        if node_filter_note(obj, pod):
            continue
        r = fits(node_allocatable(Node.model_validate(obj)), request)
        if r > room:
            best, room = name, r
    return best


async def fixes(
    config: ResolvedConfig,
    state: ClusterState,
    target: Target,
    diagnosis: dict[str, Any],
    request: dict[str, int],
    pod: Pod | None = None,
) -> list[dict[str, Any]]:
    """Fixes that work: each tried on a copy of the state with the scheduler first."""
    found: list[dict[str, Any]] = []
    quorum = diagnosis.get("quorum")
    missing = 1
    if quorum:
        missing = max(1, int(quorum["minCount"]) - int(quorum["fit"]))
    best = _best_node(state, request, diagnosis, pod)
    if best:
        obj = next(n for n in state.nodes if n["metadata"]["name"] == best)
        per = max(1, fits(node_allocatable(Node.model_validate(obj)), request))
        count = math.ceil(missing / per)
        for n in (count, count + 1):
            copy, names = state.with_clones(best, n)
            fix = await checked(
                config,
                copy,
                target,
                {
                    "fix": f"add {n} more node{'s' if n > 1 else ''} like {best}",
                    "kind": "addNodes",
                    "like": best,
                    "count": n,
                    "newNodes": names,
                },
            )
            if fix is not None:
                found.append(fix)
                break
    if quorum:
        fit, min_count = int(quorum["fit"]), int(quorum["minCount"])
        if 0 < fit < min_count:
            copy_ = state.with_min_count(target, fit)
            if copy_ is not None:
                fix = await checked(
                    config,
                    copy_,
                    target,
                    {
                        "fix": f"lower minCount to {fit} ({quorum['minCountField']})",
                        "kind": "lowerMinCount",
                        "minCount": fit,
                    },
                )
                if fix is not None:
                    found.append(fix)
    found += await free_fixes(config, state, target, diagnosis, request, pod)
    return found
