"""``troupe explain pod NS/NAME`` and ``troupe explain podgroup NS/NAME``: why a pod or
gang is not scheduled, and what would change that.

A thin command over the what-if engine (``troupe.whatif``). It reads the cluster
(``troupe.whatif.read``), then:

1. when the target is held back before any attempt (its group object missing or
   malformed, fewer pods than its minCount, scheduling gates: ``troupe.whatif.held``)
   it says so at once, in the scheduler's words;
2. else it asks the scheduler that serves for the diagnosis of its last attempt
   (``troupe.kube.debug``): found by its leader Lease and reached through the API
   server's pod proxy with the kubeconfig's own credentials, or at ``--server``. When
   it cannot be asked, or refuses, one line says why and the diagnosis is recomputed
   offline, marked as such — unless ``--server`` or ``--token-file`` was given, which
   makes that an error (exit 3 when refused);
3. ``--offline`` recomputes it without a scheduler: one attempt in an embedded cluster
   with the same profile (``--config``), binding nothing in the real cluster
   (``troupe.whatif.attempt``).

Then per node (or topology domain) what is free against what a member requests
(``troupe.whatif.fit``), and fixes, each checked first by running the scheduler on a
modified copy of the state (``troupe.whatif.fixes``). The text output lives in
``troupe.cli.explain_render``. The kubectl plugin (``troupe.cli.kubectl_plugin``) runs
the same command. See docs/explain.md.
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
from troupe.kube.connection import default_namespace
from troupe.kube.debug import (
    DebugEndpointError,
    ask_scheduler,
    fetch_explanation,
    kubeconfig_bearer,
)
from troupe.scheduler.service.logs import configure_logging
from troupe.whatif.attempt import Trial, attempt
from troupe.whatif.buy import domain_limit
from troupe.whatif.diagnosis import Diagnosis, parse_diagnosis
from troupe.whatif.errors import WhatIfError
from troupe.whatif.fit import ask_of, capacity
from troupe.whatif.fixes import find_fixes
from troupe.whatif.held import held_back
from troupe.whatif.read import ClusterAddress, read_cluster
from troupe.whatif.state import ClusterState, Target

# Where troupe's leader Lease is looked for besides the profile's own
# (``leaderElection.resourceNamespace``/``resourceName``): manifests/config.yaml's.
MANIFEST_LEASE = ("troupe-system", "troupe-scheduler")


class ExplainError(RuntimeError):
    """A flag that is missing or wrong."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", choices=["pod", "podgroup"], help="what to explain")
    p.add_argument(
        "target",
        help="NS/NAME, or NAME in the -n namespace (a Workload's gang: "
        "NS/WORKLOAD/PODGROUP[/REPLICA])",
    )
    add_cluster_arguments(p)
    p.add_argument(
        "--server",
        default=os.environ.get("TROUPE_SERVER"),
        help="ask the scheduler's debug endpoint at this URL directly (or $TROUPE_SERVER); "
        "default: the leader Lease's pod, through the API server",
    )
    p.add_argument(
        "--token-file",
        default=None,
        help="the bearer token to send to the scheduler instead of the kubeconfig's: the "
        "scheduler's --debug-token-file, or a token of the caller's (docs/explain.md)",
    )
    p.add_argument(
        "--lease",
        default=None,
        metavar="NS/NAME",
        help="the scheduler's leader Lease (default: the profile's leaderElection, then "
        "troupe-system/troupe-scheduler)",
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


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    """kubectl's conventions for which cluster and namespace."""
    p.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG)")
    p.add_argument("--context", default=None, help="the kubeconfig context to use")
    p.add_argument("--master", default=None, help="API server URL, overrides the kubeconfig")
    p.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="the namespace of a target given without one (default: the context's)",
    )


def main(args: argparse.Namespace) -> int:
    configure_logging("error")
    try:
        config = _config(args.config)
        address = _address(args)
        target = _target(args, address)
        token = _token(args.token_file)
        report = asyncio.run(explain(target, config, args, address, token))
    except (ExplainError, WhatIfError, DebugEndpointError, OSError) as exc:
        print(f"troupe explain: {exc}", file=sys.stderr)
        return 3 if isinstance(exc, DebugEndpointError) and exc.status in (401, 403) else 1
    if report.fallback:
        print(f"troupe explain: {report.fallback}; diagnosing offline instead", file=sys.stderr)
    if args.output == "json":
        print(json.dumps(report.to_json(), indent=2, default=str))
    else:
        print(render(report))
    return 0


def _target(args: argparse.Namespace, address: ClusterAddress) -> Target:
    """NS/NAME as given; with ``-n``, or without a namespace part, in that namespace
    (else the context's)."""
    text = args.target
    if args.namespace or "/" not in text:
        namespace = args.namespace or default_namespace(
            address.kubeconfig, address.context, address.in_cluster
        )
        text = f"{namespace}/{text}"
    return Target.parse(args.kind, text)


def _token(path: str | None) -> str:
    if not path:
        return ""
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
    in_cluster = (
        kubeconfig is None and args.master is None and "KUBERNETES_SERVICE_HOST" in os.environ
    )
    if kubeconfig is None and not in_cluster and not args.master:
        kubeconfig = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    return ClusterAddress(kubeconfig, args.master, args.context, in_cluster=in_cluster)


def _leases(args: argparse.Namespace, config: ResolvedConfig) -> list[tuple[str, str]]:
    if args.lease:
        namespace, _, name = args.lease.partition("/")
        if not namespace or not name:
            raise ExplainError(f"--lease: expected NS/NAME, got {args.lease!r}")
        return [(namespace, name)]
    election = config.leader_election
    own = (election.resource_namespace, election.resource_name)
    return [own] if own == MANIFEST_LEASE else [own, MANIFEST_LEASE]


async def _from_scheduler(
    target: Target,
    config: ResolvedConfig,
    args: argparse.Namespace,
    address: ClusterAddress,
    token: str,
) -> tuple[dict[str, object] | None, str]:
    """The scheduler's record (None: none) and which scheduler answered."""
    if args.server:
        token = token or await kubeconfig_bearer(
            address.kubeconfig, address.master, address.in_cluster, address.context
        )
        record = await fetch_explanation(
            args.server, token, target.kind, target.namespace, target.name, target.sub
        )
        return record, args.server
    asked = await ask_scheduler(
        address.kubeconfig,
        address.master,
        address.in_cluster,
        address.context,
        leases=_leases(args, config),
        kind=target.kind,
        namespace=target.namespace,
        name=target.name,
        sub=target.sub,
        token=token,
    )
    return asked.record, asked.where


async def explain(
    target: Target,
    config: ResolvedConfig,
    args: argparse.Namespace,
    address: ClusterAddress,
    token: str,
) -> ExplainReport:
    state = ClusterState(await read_cluster(address))
    report = ExplainReport(target, "offline" if args.offline else "scheduler")
    report.show_all = args.show_all
    held = held_back(state, target)
    if held is not None:
        report.source, report.held = "held", held
        return report
    diagnosis: Diagnosis | None = None
    offline = args.offline
    if not offline:
        try:
            record, report.asked = await _from_scheduler(target, config, args, address, token)
            diagnosis = parse_diagnosis(record) if record is not None else None
        except DebugEndpointError as exc:
            if args.server or args.token_file:
                raise  # the user named the scheduler or the token: say so, as an error
            report.source, report.fallback, offline = "offline", _one_line(exc), True
            report.fallback_why = refused_or_unreachable(exc)
    if offline:
        tried = await attempt(config, state, target)
        report.would_bind = tried.nodes if tried.bound else None
        diagnosis = tried.diagnosis
    if diagnosis is None:
        return report
    report.diagnosis = diagnosis
    ask = ask_of(state, target, diagnosis)
    report.capacity = capacity(state, ask, unlabelled=args.show_all)
    report.capacity["limit"] = domain_limit(state, target, ask)
    if not args.no_fixes:
        report.fixes = await find_fixes(Trial(config, target), state, diagnosis, ask)
    return report


def _one_line(exc: DebugEndpointError) -> str:
    text = " ".join(str(exc).split())
    return f"{refused_or_unreachable(exc)}: {text}"


def refused_or_unreachable(exc: DebugEndpointError) -> str:
    return "the scheduler refused" if exc.status in (401, 403) else "the scheduler was not reached"
