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
one, or a lower minCount. See docs/explain.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from typing import Any

from troupe.api.config import (
    ConfigError,
    ResolvedConfig,
    config_document,
    load_config,
    load_config_file,
)
from troupe.api.objects import Node, Pod
from troupe.api.quantity import format_quantity
from troupe.api.resources import node_allocatable, pod_requests
from troupe.cli.explain_state import ClusterState, ExplainError, Target, attempt, read_cluster
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
    request = _member_request(diagnosis)
    levels = (diagnosis.get("topology") or {}).get("required") or ""
    report["capacity"] = capacity(state, request, _needed(diagnosis), levels)
    if not args.no_fixes:
        report["fixes"] = await fixes(config, state, target, diagnosis, request)
    return report


# --- capacity --------------------------------------------------------------------------


def _member_request(diagnosis: dict[str, Any]) -> dict[str, int]:
    """What one member that did not fit requests (the largest such)."""
    members = diagnosis.get("members") or []
    failed = [m for m in members if m.get("reason") != "CoschedulingNotMeetMinMember"]
    pool = failed or members
    if not pool:
        return {}
    best: dict[str, int] = max(
        (m.get("requests") or {} for m in pool), key=lambda r: sorted(r.values(), reverse=True)
    )
    return best


def _needed(diagnosis: dict[str, Any]) -> int:
    """How many members must fit for the attempt to succeed."""
    quorum = diagnosis.get("quorum")
    if not quorum:
        return 1
    return max(1, int(quorum["minCount"]) - int(quorum["alreadyPlaced"]))


def _fmt(resource: str, amount: int) -> str:
    if resource == "cpu":
        text = format_quantity(amount) if amount % 1000 else str(amount // 1000)
        if amount % 1000:
            text = f"{amount}m"
        return f"{text} cpu"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return f"{format_quantity(amount, binary=True)} {resource}"
    return f"{amount} {resource}"


def fmt_vector(vector: dict[str, int]) -> str:
    shown = [
        _fmt(r, v) for r, v in sorted(vector.items(), key=lambda i: (i[0] != "cpu", i[0])) if v
    ]
    return ", ".join(shown) or "-"


def _fits(free: dict[str, int], request: dict[str, int]) -> int:
    counts = [free.get(r, 0) // v for r, v in request.items() if v > 0]
    return max(0, min(counts)) if counts else 0


def node_free(state: ClusterState) -> dict[str, tuple[dict[str, int], Obj, str]]:
    """Node name -> (what is free, the node, why it takes no pod or "")."""
    used: dict[str, dict[str, int]] = {}
    for pod in state.pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        total = used.setdefault(node, {})
        for r, v in pod_requests(Pod.model_validate(pod)).items():
            total[r] = total.get(r, 0) + v
    out = {}
    for obj in state.nodes:
        name = obj["metadata"]["name"]
        alloc = node_allocatable(Node.model_validate(obj))
        free = {r: v - used.get(name, {}).get(r, 0) for r, v in alloc.items()}
        blocked = "cordoned" if (obj.get("spec") or {}).get("unschedulable") else ""
        out[name] = (free, obj, blocked)
    return out


def capacity(
    state: ClusterState, request: dict[str, int], needed: int, level: str
) -> dict[str, Any]:
    """Per node (or per domain of the gang's required topology level): how many more
    members fit by resources, and what is short for the members needed."""
    free = node_free(state)
    rows: list[dict[str, Any]] = []
    domains: dict[str, list[str]] = {}
    for name, (vector, obj, blocked) in sorted(free.items()):
        fit = 0 if blocked else _fits(vector, request)
        short = {r: max(0, v - vector.get(r, 0)) for r, v in request.items()} if not fit else {}
        rows.append(
            {
                "node": name,
                "free": {r: v for r, v in vector.items() if r in request or r == "cpu"},
                "fit": fit,
                "short": {r: v for r, v in short.items() if v},
                "note": blocked,
            }
        )
        if level:
            value = (obj["metadata"].get("labels") or {}).get(level, "")
            domains.setdefault(value or "(no label)", []).append(name)
    out: dict[str, Any] = {"request": request, "needed": needed, "nodes": rows}
    if not level:
        domains = {"": sorted(free)}
    by_node = {row["node"]: row for row in rows}
    out["level"] = level
    out["domains"] = []
    for value, names in sorted(domains.items()):
        fit = min(needed, sum(int(by_node[n]["fit"]) for n in names))
        left = {r: sum(free[n][0].get(r, 0) for n in names if not free[n][2]) for r in request}
        short = {r: max(0, (needed - fit) * v - (left[r] - fit * v)) for r, v in request.items()}
        out["domains"].append(
            {
                "domain": f"{level}={value}" if level else "cluster",
                "nodes": len(names),
                "fit": fit,
                "needed": needed,
                "short": {r: v for r, v in short.items() if v},
                "free": left,
            }
        )
    return out


# --- fixes ----------------------------------------------------------------------------


def _best_node(state: ClusterState, request: dict[str, int], diagnosis: dict[str, Any]) -> str:
    """The node to clone: one a member fits on in this attempt when there is one (it
    passes every filter), else the one with the most room for a member when empty."""
    fits_on = [m.get("fitsOn") for m in diagnosis.get("members") or [] if m.get("fitsOn")]
    names = {n["metadata"]["name"]: n for n in state.nodes}
    if fits_on and fits_on[0] in names:
        return str(fits_on[0])
    best, room = "", -1
    for name, obj in sorted(names.items()):
        if (obj.get("spec") or {}).get("unschedulable"):
            continue
        r = _fits(node_allocatable(Node.model_validate(obj)), request)
        if r > room:
            best, room = name, r
    return best


async def fixes(
    config: ResolvedConfig,
    state: ClusterState,
    target: Target,
    diagnosis: dict[str, Any],
    request: dict[str, int],
) -> list[dict[str, Any]]:
    """Fixes that work: each tried on a copy of the state with the scheduler first."""
    found: list[dict[str, Any]] = []
    quorum = diagnosis.get("quorum")
    missing = 1
    if quorum:
        missing = max(1, int(quorum["minCount"]) - int(quorum["fit"]))
    best = _best_node(state, request, diagnosis)
    if best:
        obj = next(n for n in state.nodes if n["metadata"]["name"] == best)
        per = max(1, _fits(node_allocatable(Node.model_validate(obj)), request))
        count = math.ceil(missing / per)
        for n in (count, count + 1):
            copy, names = state.with_clones(best, n)
            start = time.perf_counter()
            outcome = await attempt(config, copy, target)
            if outcome.bound:
                found.append(
                    {
                        "fix": f"add {n} more node{'s' if n > 1 else ''} like {best}",
                        "kind": "addNodes",
                        "like": best,
                        "count": n,
                        "verified": True,
                        "checkSeconds": round(time.perf_counter() - start, 2),
                        "placement": outcome.nodes,
                        "newNodes": names,
                    }
                )
                break
    if quorum:
        fit, min_count = int(quorum["fit"]), int(quorum["minCount"])
        if 0 < fit < min_count:
            copy_ = state.with_min_count(target, fit)
            if copy_ is not None:
                start = time.perf_counter()
                outcome = await attempt(config, copy_, target)
                if outcome.bound:
                    found.append(
                        {
                            "fix": f"lower minCount to {fit} ({quorum['minCountField']})",
                            "kind": "lowerMinCount",
                            "minCount": fit,
                            "verified": True,
                            "checkSeconds": round(time.perf_counter() - start, 2),
                            "placement": outcome.nodes,
                        }
                    )
    return found


# --- text -------------------------------------------------------------------------------


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    return [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip()
        for row in [header, *rows]
    ]


def _rejections(member: dict[str, Any]) -> str:
    if member.get("reason") == "CoschedulingNotMeetMinMember":
        where = member.get("fitsOn")
        return f"fits (on {where}); waits for the quorum" if where else "fits; waits for the quorum"
    parts = [
        f"{r['extensionPoint']}/{r['plugin']}: {r['nodes']} node(s)"
        for r in member.get("rejections") or []
    ]
    if member.get("preFilter"):
        parts.append(f"PreFilter: {member['preFilter']}")
    return "; ".join(parts) or member.get("message") or member.get("code") or "-"


def render(report: dict[str, Any]) -> str:
    t = report["target"]
    out = [f"{t['kind']} {t['name']} (diagnosis: {report['source']})"]
    d = report.get("diagnosis")
    if d is None:
        if "wouldBind" in report:
            nodes = ", ".join(f"{k} -> {v}" for k, v in sorted(report["wouldBind"].items()))
            out.append(f"  schedulable now: the next attempt binds it ({nodes})")
        else:
            out.append(
                "  the scheduler has no failed attempt recorded (bound, unknown, or not tried yet)"
            )
        return "\n".join(out)
    age = time.time() - float(d.get("time") or time.time())
    if report["source"] == "scheduler":
        out[0] += f", last attempt {age:.0f}s ago"
    out.append(f"  {d.get('message', '')}")
    quorum = d.get("quorum")
    if quorum:
        out += [
            "",
            "QUORUM",
            f"  minCount {quorum['minCount']} ({quorum['minCountField']}); placed before: "
            f"{quorum['alreadyPlaced']}; would fit now: {quorum['fit']}; pending pods: "
            f"{quorum['pending']}",
        ]
        if d.get("minResourcesShortfall"):
            out.append(f"  minResources short: {d['minResourcesShortfall']}")
    # Members with the same verdict on one line.
    groups: dict[tuple[str, str], list[str]] = {}
    for m in d.get("members") or []:
        groups.setdefault((m["reason"], _rejections(m)), []).append(m["pod"])
    rows = []
    for (reason, why), pods in groups.items():
        who = pods[0] if len(pods) == 1 else f"{pods[0]} (+{len(pods) - 1} more)"
        rows.append([who, reason, why])
    out += ["", "MEMBERS" if quorum else "POD"]
    out += [
        "  " + line
        for line in _table(["POD", "REASON", "REJECTED AT (first rejecting plugin)"], rows)
    ]
    for m in (d.get("members") or [])[:1]:
        if m.get("reasons"):
            reasons = ", ".join(f"{n} {r}" for r, n in m["reasons"].items())
            out.append(f"  e.g. {m['pod']}: {m.get('nodes', 0)} node(s): {reasons}")
    cap = report.get("capacity")
    if cap:
        out += [
            "",
            f"CAPACITY (one member requests {fmt_vector(cap['request'])}; {cap['needed']} needed)",
        ]
        for dom in cap.get("domains") or []:
            short = f"; short {fmt_vector(dom['short'])}" if dom["short"] else ""
            if not short and dom["fit"] < dom["needed"]:
                short = (
                    f"; {fmt_vector(dom['free'])} free in all, but no node has room "
                    "for one more member"
                )
            out.append(f"  {dom['domain']}: {dom['fit']} of {dom['needed']} fit{short}")
        rows = [
            [
                r["node"],
                fmt_vector(r["free"]),
                str(r["fit"]),
                fmt_vector(r["short"]) if r["short"] else "-",
                r["note"],
            ]
            for r in cap["nodes"]
        ]
        out += ["  " + line for line in _table(["NODE", "FREE", "FIT", "SHORT FOR ONE", ""], rows)]
    pre = d.get("preemption")
    if pre:
        out += ["", "PREEMPTION", f"  {pre['result']}: {pre['message']}"]
        if pre.get("victims"):
            out.append(f"  victims: {', '.join(pre['victims'])}")
    elif quorum is None and d["members"] and d["members"][0].get("postFilter"):
        out += ["", "PREEMPTION", f"  {d['members'][0]['postFilter']}"]
    elif quorum is not None:
        out += [
            "",
            "PREEMPTION",
            "  nothing evicted: no pod preemption may evict would make room for the gang",
        ]
    if "fixes" in report:
        out += [
            "",
            "FIXES (each checked by running the scheduler on a modified copy of the cluster)",
        ]
        if not report["fixes"]:
            out.append("  none found among: more nodes like the best one, a lower minCount")
        for fix in report["fixes"]:
            out.append(f"  - {fix['fix']}  (checked: binds; {fix['checkSeconds']}s)")
    return "\n".join(out)
