"""``troupe explain``'s capacity section: per node (and per domain of the gang's
required topology level) what is free against what one member requests.

Resources are counted from requests. Nodes the member's own Filters reject for a
reason other than resources (cordoned, a taint it does not tolerate, its nodeSelector
or required node affinity) are marked and count no room, so a node with free room it
may not use is not shown as a place it would fit (``node_filter_note``).
"""

from __future__ import annotations

from typing import Any

from troupe.api.objects import Node, Pod, Taint
from troupe.api.quantity import format_quantity
from troupe.api.resources import node_allocatable, pod_requests
from troupe.api.selectors import find_untolerated_taint, node_matches_pod, tolerates
from troupe.cli.explain_state import ClusterState, Target

Obj = dict[str, Any]
# TaintToleration's Filter: taints with these effects keep a pod off a node.
FILTER_EFFECTS = ("NoSchedule", "NoExecute")


def member_request(diagnosis: dict[str, Any]) -> dict[str, int]:
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


def needed(diagnosis: dict[str, Any]) -> int:
    """How many members must fit for the attempt to succeed."""
    quorum = diagnosis.get("quorum")
    if not quorum:
        return 1
    return max(1, int(quorum["minCount"]) - int(quorum["alreadyPlaced"]))


def representative(state: ClusterState, target: Target, diagnosis: dict[str, Any]) -> Pod | None:
    """The pending pod the capacity is shown for: the first member that did not fit
    (its nodeSelector, affinity and tolerations), else any pending member."""
    pending = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in state.members(target)
    }
    failed = [
        m["pod"]
        for m in diagnosis.get("members") or []
        if m.get("reason") != "CoschedulingNotMeetMinMember" and m.get("pod") in pending
    ]
    for key in failed or sorted(pending):
        return Pod.model_validate(pending[key])
    return None


def _fmt(resource: str, amount: int) -> str:
    if resource == "cpu":
        text = f"{amount}m" if amount % 1000 else str(amount // 1000)
        return f"{text} cpu"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return f"{format_quantity(amount, binary=True)} {resource}"
    return f"{amount} {resource}"


def fmt_vector(vector: dict[str, int]) -> str:
    shown = [
        _fmt(r, v) for r, v in sorted(vector.items(), key=lambda i: (i[0] != "cpu", i[0])) if v
    ]
    return ", ".join(shown) or "-"


def fits(free: dict[str, int], request: dict[str, int]) -> int:
    counts = [free.get(r, 0) // v for r, v in request.items() if v > 0]
    return max(0, min(counts)) if counts else 0


def node_filter_note(obj: Obj, pod: Pod | None) -> str:
    """Why the pod may not go on this node whatever its room ("" when it may): the
    node is cordoned, has a taint the pod does not tolerate, or does not match the
    pod's nodeSelector or required node affinity (the NodeUnschedulable,
    TaintToleration and NodeAffinity filters)."""
    node = Node.model_validate(obj)
    if node.spec.unschedulable:
        cordon = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
        tolerated = pod is not None and any(tolerates(t, cordon) for t in pod.spec.tolerations)
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


def node_free(
    state: ClusterState, pod: Pod | None = None
) -> dict[str, tuple[dict[str, int], Obj, str]]:
    """Node name -> (what is free, the node, why the pod may not go there or "")."""
    used: dict[str, dict[str, int]] = {}
    for p in state.pods:
        node = (p.get("spec") or {}).get("nodeName")
        if not node or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        total = used.setdefault(node, {})
        for r, v in pod_requests(Pod.model_validate(p)).items():
            total[r] = total.get(r, 0) + v
    out = {}
    for obj in state.nodes:
        name = obj["metadata"]["name"]
        alloc = node_allocatable(Node.model_validate(obj))
        free = {r: v - used.get(name, {}).get(r, 0) for r, v in alloc.items()}
        out[name] = (free, obj, node_filter_note(obj, pod))
    return out


def capacity(
    state: ClusterState,
    request: dict[str, int],
    needed: int,
    level: str,
    pod: Pod | None = None,
) -> dict[str, Any]:
    """Per node (or per domain of the gang's required topology level): how many more
    members fit by resources on the nodes its filters allow, and what is short for
    the members needed."""
    free = node_free(state, pod)
    rows: list[dict[str, Any]] = []
    domains: dict[str, list[str]] = {}
    for name, (vector, obj, blocked) in sorted(free.items()):
        fit = 0 if blocked else fits(vector, request)
        short = {r: max(0, v - vector.get(r, 0)) for r, v in request.items()} if not fit else {}
        rows.append(
            {
                "node": name,
                "free": {r: v for r, v in vector.items() if r in request or r == "cpu"},
                "fit": fit,
                "short": {r: v for r, v in short.items() if v} if not blocked else {},
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
                "excluded": sum(1 for n in names if free[n][2]),
                "fit": fit,
                "needed": needed,
                "short": {r: v for r, v in short.items() if v},
                "free": left,
            }
        )
    return out
