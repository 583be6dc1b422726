"""The fit check: per node (and per domain of the gang's required topology level) what
is free against what one member requests, and how many members fit.

``ask_of`` reads from a diagnosis what the check and the fixes are about (``Ask``): the
requests of the largest member that did not fit, how many members must still fit,
the required topology level, and the pending pod whose filters count. ``capacity``
is ``troupe explain``'s capacity section; ``node_free`` and ``fits`` are shared with
the free-capacity search (``troupe.whatif.free``) and the node-adding fix
(``troupe.whatif.fixes``).

Resources are counted from requests. Nodes the member's own Filters reject for a
reason other than resources (cordoned, a taint it does not tolerate, its nodeSelector
or required node affinity: the NodeUnschedulable, TaintToleration and NodeAffinity
filters' rules, through ``troupe.api.selectors``) are marked and count no room, so a
node with free room it may not use is not shown as a place it would fit
(``node_filter_note``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from troupe.api.objects import Node, Pod, Taint
from troupe.api.resources import node_allocatable, pod_requests
from troupe.api.selectors import find_untolerated_taint, node_matches_pod, tolerates
from troupe.whatif.diagnosis import Diagnosis
from troupe.whatif.state import ClusterState, Target, bound, pod_key
from troupe.whatif.units import amount_text

Obj = dict[str, Any]
# TaintToleration's Filter: taints with these effects keep a pod off a node.
FILTER_EFFECTS: Final = ("NoSchedule", "NoExecute")
CORDON: Final = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
_RUNS: Final = re.compile(r"\d+|\D+")


@dataclass(frozen=True, slots=True)
class Ask:
    """What the fit check and the fixes are about."""

    request: dict[str, int]  # one member's requests
    needed: int  # members that must still fit
    level: str = ""  # the required topology level ("" none)
    pod: Pod | None = None  # the pending pod whose filters count


@dataclass(frozen=True, slots=True)
class NodeRoom:
    free: dict[str, int]  # allocatable minus the requests of the pods bound there
    node: Obj
    note: str  # why the pod may not go there ("" when it may)


def ask_of(state: ClusterState, target: Target, diagnosis: Diagnosis) -> Ask:
    return Ask(
        member_request(diagnosis),
        needed(diagnosis),
        diagnosis.required_level,
        representative(state, target, diagnosis),
    )


def member_request(diagnosis: Diagnosis) -> dict[str, int]:
    """What one member that did not fit requests (the largest such)."""
    failed = [m for m in diagnosis.members if not m.waits_for_quorum]
    pool = failed or list(diagnosis.members)
    if not pool:
        return {}
    largest = max(pool, key=lambda m: sorted(m.requests.values(), reverse=True))
    return dict(largest.requests)


def needed(diagnosis: Diagnosis) -> int:
    """How many members must fit for the attempt to succeed."""
    quorum = diagnosis.quorum
    if quorum is None:
        return 1
    return max(1, quorum.min_count - quorum.already_placed)


def representative(state: ClusterState, target: Target, diagnosis: Diagnosis) -> Pod | None:
    """The pending pod the capacity is shown for: the first member that did not fit
    (its nodeSelector, affinity and tolerations), else any pending member."""
    pending = {pod_key(p): p for p in state.members(target)}
    failed = [m.pod for m in diagnosis.members if not m.waits_for_quorum and m.pod in pending]
    for key in failed or sorted(pending):
        return Pod.model_validate(pending[key])
    return None


def fmt_vector(vector: dict[str, int]) -> str:
    """``4 cpu, 8 nvidia.com/gpu``: cpu first, zeros left out ("-" when nothing is), in
    the units a person reads (``troupe.whatif.units``)."""
    shown = [
        amount_text(r, v)
        for r, v in sorted(vector.items(), key=lambda i: (i[0] != "cpu", i[0]))
        if v
    ]
    return ", ".join(shown) or "-"


def fits(free: dict[str, int], request: dict[str, int]) -> int:
    """How many of ``request`` fit in ``free``."""
    counts = [free.get(r, 0) // v for r, v in request.items() if v > 0]
    return max(0, min(counts)) if counts else 0


def node_filter_note(obj: Obj, pod: Pod | None) -> str:
    """Why the pod may not go on this node whatever its room ("" when it may): the
    node is cordoned, has a taint the pod does not tolerate, or does not match the
    pod's nodeSelector or required node affinity (the NodeUnschedulable,
    TaintToleration and NodeAffinity filters)."""
    node = Node.model_validate(obj)
    if node.spec.unschedulable:
        tolerated = pod is not None and any(tolerates(t, CORDON) for t in pod.spec.tolerations)
        if not tolerated:
            return "cordoned"
    if pod is None:
        return ""
    taint = find_untolerated_taint(node.spec.taints, pod.spec.tolerations, FILTER_EFFECTS)
    if taint is not None:
        value = f"={taint.value}" if taint.value else ""
        return f"taint {taint.key}{value}:{taint.effect} not tolerated"
    if not node_matches_pod(node, pod):
        return "nodeSelector/affinity does not match"
    return ""


def node_free(state: ClusterState, pod: Pod | None = None) -> dict[str, NodeRoom]:
    """Node name -> what is free there, the node, and why the pod may not go there."""
    used: dict[str, dict[str, int]] = {}
    for p in state.pods:
        if not bound(p):
            continue
        total = used.setdefault(p["spec"]["nodeName"], {})
        for r, v in pod_requests(Pod.model_validate(p), cap=True).items():  # as the cache
            total[r] = total.get(r, 0) + v
    out = {}
    for obj in state.nodes:
        name = obj["metadata"]["name"]
        alloc = node_allocatable(Node.model_validate(obj))
        free = {r: v - used.get(name, {}).get(r, 0) for r, v in alloc.items()}
        out[name] = NodeRoom(free, obj, node_filter_note(obj, pod))
    return out


def natural_key(name: str) -> tuple[Any, ...]:
    """``gpu-8`` before ``gpu-10``: digit runs compare as numbers."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in _RUNS.findall(name)
    )


def _shortness(short: dict[str, int], request: dict[str, int]) -> Fraction:
    """How far from room for one member: the shortfall in members' worth, summed."""
    return sum((Fraction(v, request[r]) for r, v in short.items() if request.get(r)), Fraction(0))


def _node_row(name: str, room: NodeRoom, request: dict[str, int], level: str) -> dict[str, Any]:
    fit = 0 if room.note else fits(room.free, request)
    short = {r: max(0, v - room.free.get(r, 0)) for r, v in request.items()} if not fit else {}
    alloc = node_allocatable(Node.model_validate(room.node))
    row: dict[str, Any] = {
        "node": name,
        "free": {r: v for r, v in room.free.items() if r in request or r == "cpu"},
        "fit": fit,
        "short": {r: v for r, v in short.items() if v} if not room.note else {},
        "note": room.note,
        # Requested resources the node has none of: it can never hold a member.
        "lacks": sorted(r for r, v in request.items() if v > 0 and alloc.get(r, 0) <= 0),
    }
    if level:
        row["domain"] = (room.node["metadata"].get("labels") or {}).get(level)
    return row


def _domain_row(
    domain: str, names: list[str], rooms: dict[str, NodeRoom], fit_of: dict[str, int], ask: Ask
) -> dict[str, Any]:
    request, need = ask.request, ask.needed
    fit = min(need, sum(fit_of[n] for n in names))
    left = {r: sum(rooms[n].free.get(r, 0) for n in names if not rooms[n].note) for r in request}
    short = {r: max(0, (need - fit) * v - (left[r] - fit * v)) for r, v in request.items()}
    return {
        "domain": domain,
        "nodes": len(names),
        "excluded": sum(1 for n in names if rooms[n].note),
        "fit": fit,
        "needed": need,
        "short": {r: v for r, v in short.items() if v},
        "free": left,
    }


def capacity(state: ClusterState, ask: Ask, *, unlabelled: bool = False) -> dict[str, Any]:
    """Per node (and per domain of the gang's required topology level, or the whole
    cluster): how many more members fit by resources on the nodes its filters allow,
    and what is short for the members needed. Closest first: domains by members that
    fit, then by what is short; nodes by their domain's rank, then excluded last, then
    by members that fit and what is short for one. Nodes without the level's label
    are in no domain (a gang that needs one cannot use them): counted in
    ``unlabelled``, and listed as a domain of their own only with ``unlabelled``."""
    rooms = node_free(state, ask.pod)
    rows = [_node_row(name, room, ask.request, ask.level) for name, room in rooms.items()]
    fit_of = {row["node"]: int(row["fit"]) for row in rows}
    domains: dict[str, list[str]] = {}
    outside: list[str] = []
    if ask.level:
        for name, room in rooms.items():
            value = (room.node["metadata"].get("labels") or {}).get(ask.level)
            if value is None:
                outside.append(name)
            else:
                domains.setdefault(f"{ask.level}={value}", []).append(name)
        if unlabelled and outside:
            domains[f"{ask.level}=(no label)"] = outside
    else:
        domains = {"cluster": list(rooms)}
    domain_rows = [
        _domain_row(domain, sorted(names, key=natural_key), rooms, fit_of, ask)
        for domain, names in domains.items()
    ]
    pseudo = f"{ask.level}=(no label)"
    domain_rows.sort(
        key=lambda d: (
            d["domain"] == pseudo,
            -d["fit"],
            _shortness(d["short"], ask.request),
            natural_key(d["domain"]),
        )
    )
    rank = {d["domain"].partition("=")[2]: i for i, d in enumerate(domain_rows)}
    rows.sort(
        key=lambda r: (
            rank.get(r.get("domain") or "", len(rank)) if ask.level else 0,
            bool(r["note"] or r["lacks"]),
            -r["fit"],
            _shortness(r["short"], ask.request),
            natural_key(r["node"]),
        )
    )
    return {
        "request": ask.request,
        "needed": ask.needed,
        "nodes": rows,
        "level": ask.level,
        "domains": domain_rows,
        "unlabelled": len(outside),
    }
