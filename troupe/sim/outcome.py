"""What a replay did, read back from the embedded cluster once its scheduler is idle.

``outcome`` reports where the pods a replay scheduled went (``pending_reason``: the
message of a pending pod's ``PodScheduled`` condition), every gang with its members
bound (``gangs``), and the cluster's utilisation and fragmentation (``usage``); with
the times the pods were bound, each gang's timeline for the HTML report
(``troupe.sim.report``). Loading a snapshot and running the scheduler are the what-if
engine's (``troupe.whatif``); this module only reads the embedded cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from troupe.api.gangs import POD_GROUP_LABEL
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.cluster import SimCluster
from troupe.sim.usage import TERMINAL_PHASES, NodeUsage, format_amount, node_usage, shown

Obj = dict[str, Any]


def key(obj: Obj) -> str:
    """``namespace/name`` (``name`` for a cluster-scoped object)."""
    meta = obj.get("metadata", {})
    ns = meta.get("namespace", "")
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


@dataclass(slots=True)
class Outcome:
    pods: list[dict[str, str]] = field(default_factory=list)
    gangs: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, str]] = field(default_factory=list)
    utilisation: dict[str, dict[str, Any]] = field(default_factory=dict)
    fragmentation: dict[str, str] = field(default_factory=dict)
    # For the HTML report (not in ``-o json``): each node's numbers, and each gang's
    # members bound during the replay, in seconds from the scheduler's start.
    nodes: list[NodeUsage] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "pods": self.pods,
            "gangs": self.gangs,
            "pending": self.pending,
            "utilisation": self.utilisation,
            "fragmentation": self.fragmentation,
        }


def pending_reason(pod: Obj) -> str:
    for cond in pod.get("status", {}).get("conditions", []):
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("message") or cond.get("reason") or "")
    return "not attempted yet"


def outcome(
    cluster: SimCluster, scheduled: Iterable[str], bound_at: Mapping[str, float] | None = None
) -> Outcome:
    """Where the pods of ``scheduled`` went, the gangs and the utilisation; with
    ``bound_at`` (pod -> when it was bound) the gang timeline too."""
    store = cluster.store
    pods = {key(p): p for p in store.list("pods", copy=False)}
    out = Outcome()
    for name in scheduled:
        ns, _, pod_name = name.partition("/")
        pod = pods.get(name)
        node = pod["spec"].get("nodeName", "") if pod else ""
        out.pods.append({"namespace": ns, "name": pod_name, "node": node})
        if not node:
            reason = pending_reason(pod) if pod else "deleted during the replay"
            out.pending.append({"namespace": ns, "name": pod_name, "reason": reason})
    rows = _gangs(cluster, list(pods.values()))
    out.gangs = [r for r, _ in rows]
    out.nodes = node_usage(cluster, list(pods.values()))
    out.utilisation, out.fragmentation = usage(cluster, list(pods.values()), out.nodes)
    if bound_at is not None:
        out.timeline = [_times(row, members, bound_at) for row, members in rows]
    return out


def _times(
    row: dict[str, Any], members: list[str], bound_at: Mapping[str, float]
) -> dict[str, Any]:
    """A gang's bindings during the replay. Every member was there when the scheduler
    started (submitted 0); members bound in the snapshot already have no time."""
    times = sorted(bound_at[m] for m in members if m in bound_at)
    return {
        "namespace": row["namespace"],
        "name": row["name"],
        "api": row["api"],
        "members": len(members),
        "boundBefore": row["bound"] - len(times),
        "submitted": 0.0,
        "firstBound": times[0] if times else None,
        "lastBound": times[-1] if times else None,
    }


Member = Callable[[Obj], bool]
Gang = tuple[str, int, Member]  # name, minCount, which pods are its members


def _gang_types(cluster: SimCluster) -> list[ResourceType]:
    """The served types holding gang objects, each storage once."""
    store = cluster.store
    native = store.resolve("podgroups.scheduling.k8s.io").version
    return [
        rt
        for rt in store.registry
        if rt.plural in ("podgroups", "workloads")
        and not rt.shares_storage_of
        and rt.group in ("scheduling.x-k8s.io", "scheduling.k8s.io")
        # One PodGroup storage, served at two versions.
        and not (
            rt.plural == "podgroups" and rt.group == "scheduling.k8s.io" and rt.version != native
        )
    ]


def _gangs_of(rt: ResourceType, obj: Obj) -> list[Gang]:
    """The gangs one group object defines (a v1alpha1 Workload: one per pod group)."""
    name, spec = obj["metadata"]["name"], obj.get("spec", {})
    if rt.group == "scheduling.x-k8s.io":
        return [(name, int(spec.get("minMember", 0)), _labelled(name))]
    if rt.plural == "podgroups":
        policy = spec.get("schedulingPolicy") or {}
        if "basic" in policy and "gang" not in policy:
            return []  # a basic-policy group: no gang
        return [(name, int((policy.get("gang") or {}).get("minCount", 0)), _in_group(name))]
    if rt.version != "v1alpha1":
        return []
    return [
        (f"{name}/{group.get('name', '')}", int(gang.get("minCount", 0)), _refers_to(name, group))
        for group in spec.get("podGroups", [])
        if (gang := (group.get("policy") or {}).get("gang")) is not None
    ]


def _labelled(name: str) -> Member:
    """scheduler-plugins: the pod-group label."""
    return lambda p: p["metadata"].get("labels", {}).get(POD_GROUP_LABEL) == name


def _in_group(name: str) -> Member:
    """The standalone PodGroup: ``spec.schedulingGroup.podGroupName``."""
    return lambda p: (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == name


def _refers_to(workload: str, group: Obj) -> Member:
    """A v1alpha1 Workload's pod group: ``spec.workloadRef``."""
    wanted = (workload, group.get("name", ""))

    def member(p: Obj) -> bool:
        ref = p["spec"].get("workloadRef") or {}
        return (ref.get("name"), ref.get("podGroup")) == wanted

    return member


def _gangs(cluster: SimCluster, pods: list[Obj]) -> list[tuple[dict[str, Any], list[str]]]:
    """Each gang's row and the keys of its live member pods."""
    live = [p for p in pods if p.get("status", {}).get("phase") not in TERMINAL_PHASES]
    rows: list[tuple[dict[str, Any], list[str]]] = []
    for rt in _gang_types(cluster):
        for obj in cluster.store.list(rt, copy=False):
            ns = obj["metadata"]["namespace"]
            for name, min_count, is_member in _gangs_of(rt, obj):
                members = [p for p in live if p["metadata"]["namespace"] == ns and is_member(p)]
                row = {
                    "namespace": ns,
                    "name": name,
                    "api": obj["apiVersion"],
                    "minCount": min_count,
                    "bound": sum(1 for p in members if p["spec"].get("nodeName")),
                }
                rows.append((row, sorted(key(p) for p in members)))
    rows.sort(key=lambda r: (r[0]["namespace"], r[0]["name"], r[0]["api"]))
    return rows


def usage(
    cluster: SimCluster, pods: list[Obj], nodes: list[NodeUsage] | None = None
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Utilisation (requested/allocatable over all nodes) and fragmentation (the
    largest free amount on any one node), per resource."""
    if nodes is None:
        nodes = node_usage(cluster, pods)
    allocatable = {n.name: n.allocatable for n in nodes}
    requested = {n.name: n.requested for n in nodes}
    resources = sorted({r for a in allocatable.values() for r in a if shown(r)})
    utilisation: dict[str, dict[str, Any]] = {}
    fragmentation: dict[str, str] = {}
    for r in resources:
        total = sum(a.get(r, 0) for a in allocatable.values())
        used = sum(requested[n].get(r, 0) for n in allocatable)
        utilisation[r] = {
            "requested": format_amount(r, used),
            "allocatable": format_amount(r, total),
            "percent": round(100 * used / total, 1) if total else 0.0,
        }
        free = max(
            (a.get(r, 0) - requested[n].get(r, 0) for n, a in allocatable.items()), default=0
        )
        fragmentation[r] = format_amount(r, max(free, 0))
    return utilisation, fragmentation
