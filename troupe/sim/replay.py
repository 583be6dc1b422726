"""``troupe replay``'s offline half: a snapshot loaded into an embedded cluster, the
what-if changes applied to it, and the outcome read back once the scheduler is idle.

``load_snapshot`` creates every captured object through the store of a fresh
``SimCluster`` (started with no ``NodeSpec``): namespaces and PriorityClasses first,
then nodes (with their captured status), PodDisruptionBudgets, the gang objects and the
pods. Bound pods keep their ``nodeName``; pods in a terminal phase hold no resources and
are left out. ``add_nodes`` clones a node template, ``remove_nodes`` deletes the nodes
a label selector matches and re-creates their pods unbound, ``add_objects`` creates
more objects (a new gang, ...). ``to_schedule`` names the pods a troupe profile is to
place; after the run ``outcome`` reports where they went, the gangs, and the cluster's
utilisation and fragmentation. The scheduler itself is ``troupe.cli.replay``'s business
(this package does not import it).
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from troupe.sim.apiserver.errors import ApiError
from troupe.sim.apiserver.resources import ResourceType
from troupe.sim.cluster import SimCluster
from troupe.sim.snapshot_file import NEVER_CAPTURED, RESOURCES, Snapshot
from troupe.sim.usage import TERMINAL_PHASES, NodeUsage, format_amount, node_usage, shown

Obj = dict[str, Any]
# Server-set metadata a create would refuse or overwrite.
_SERVER_META: Final = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)
POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"


class ReplayError(ValueError):
    """An object of the snapshot or of ``--add`` that cannot be created."""


def key(obj: Obj) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace", "")
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


def _type_of(cluster: SimCluster, obj: Obj, plural: str | None = None) -> ResourceType:
    """The served type of ``obj`` by its apiVersion and kind (or ``plural``)."""
    api_version = str(obj.get("apiVersion", ""))
    group, _, version = api_version.rpartition("/")
    kind = obj.get("kind")
    for rt in cluster.store.registry:
        if (
            rt.group == group
            and rt.version == version
            and (rt.plural == plural if plural else rt.kind == kind)
        ):
            return rt
    raise ReplayError(f"{kind or plural} {key(obj)}: the cluster does not serve {api_version}")


def _clean(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {})
    for name in _SERVER_META:
        meta.pop(name, None)
    return obj


def create(cluster: SimCluster, obj: Obj, plural: str | None = None, *, exist_ok: bool) -> None:
    if obj.get("kind") in NEVER_CAPTURED:
        raise ReplayError(f"{obj['kind']} {key(obj)}: not replayed")
    rt = _type_of(cluster, obj, plural)
    try:
        cluster.store.create(rt, _clean(obj))
    except ApiError as exc:
        if exc.code == 409 and exist_ok:
            return
        raise ReplayError(f"{rt.kind} {key(obj)}: {exc}") from exc


def load_snapshot(cluster: SimCluster, snapshot: Snapshot) -> None:
    """Create the snapshot's objects in ``cluster`` (started, no nodes of its own)."""
    for resource, plural in RESOURCES.items():
        for obj in snapshot.objects(resource):
            if resource == "pods" and obj.get("status", {}).get("phase") in TERMINAL_PHASES:
                continue
            # Namespaces and PriorityClasses the embedded cluster makes itself
            # (default, kube-system, system-node-critical, ...) are already there.
            create(
                cluster,
                obj,
                plural.split(".", 1)[0],
                exist_ok=resource in ("namespaces", "priorityclasses"),
            )


def add_nodes(cluster: SimCluster, template: Obj, count: int) -> list[str]:
    """``count`` copies of ``template`` named ``<template name>-replay-<i>``."""
    base = template.get("metadata", {}).get("name") or "node"
    names = []
    for i in range(count):
        node = _clean(template)
        node["metadata"]["name"] = name = f"{base}-replay-{i}"
        labels = node["metadata"].setdefault("labels", {})
        if "kubernetes.io/hostname" in labels:
            labels["kubernetes.io/hostname"] = name
        node.setdefault("apiVersion", "v1")
        node.setdefault("kind", "Node")
        create(cluster, node, exist_ok=False)
        names.append(name)
    return names


def remove_nodes(cluster: SimCluster, selector: str) -> tuple[list[str], list[str]]:
    """Delete the nodes ``selector`` matches; their pods are re-created unbound (they
    are pending again, as if their controller had replaced them). (nodes, pods)."""
    store = cluster.store
    nodes = [n["metadata"]["name"] for n in store.list("nodes", label_selector=selector)]
    moved: list[str] = []
    for name in nodes:
        pods = store.list("pods", field_selector=f"spec.nodeName={name}")
        cluster.remove_node(name)
        for pod in pods:
            pod = _clean(pod)
            pod["spec"].pop("nodeName", None)
            pod.pop("status", None)
            store.create("pods", pod)
            moved.append(key(pod))
    return nodes, moved


def add_objects(cluster: SimCluster, docs: Iterable[Obj]) -> list[str]:
    """Create ``docs`` (namespaces first); their ``kind/name``s."""
    docs = sorted(docs, key=lambda d: d.get("kind") != "Namespace")
    made = []
    for doc in docs:
        create(cluster, doc, exist_ok=False)
        made.append(f"{doc.get('kind')}/{key(doc)}")
    return made


def to_schedule(cluster: SimCluster, scheduler_names: Collection[str]) -> list[str]:
    """The pods of a troupe profile with no node yet: what the replay schedules."""
    return sorted(
        key(p)
        for p in cluster.store.list("pods", copy=False)
        if not p["spec"].get("nodeName") and p["spec"].get("schedulerName") in scheduler_names
    )


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


def gangs(cluster: SimCluster, pods: list[Obj]) -> list[dict[str, Any]]:
    """One row per gang: its namespace, name, API (apiVersion), minCount and members bound."""
    return [row for row, _ in _gangs(cluster, pods)]


def _gangs(cluster: SimCluster, pods: list[Obj]) -> list[tuple[dict[str, Any], list[str]]]:
    """Each gang's row and the keys of its live member pods."""
    store = cluster.store
    rows: list[tuple[dict[str, Any], list[str]]] = []
    live = [p for p in pods if p.get("status", {}).get("phase") not in TERMINAL_PHASES]

    def row(obj: Obj, name: str, min_count: int, member: Any) -> None:
        ns = obj["metadata"]["namespace"]
        members = [p for p in live if p["metadata"]["namespace"] == ns and member(p)]
        rows.append(
            (
                {
                    "namespace": ns,
                    "name": name,
                    "api": obj["apiVersion"],
                    "minCount": min_count,
                    "bound": sum(1 for p in members if p["spec"].get("nodeName")),
                },
                sorted(key(p) for p in members),
            )
        )

    for rt in store.registry:
        if rt.plural not in ("podgroups", "workloads") or rt.shares_storage_of:
            continue
        if rt.group not in ("scheduling.x-k8s.io", "scheduling.k8s.io"):
            continue
        if (
            rt.plural == "podgroups"
            and rt.group == "scheduling.k8s.io"
            and rt.version != (store.resolve("podgroups.scheduling.k8s.io").version)
        ):
            continue  # one PodGroup storage, served at two versions
        for obj in store.list(rt, copy=False):
            name = obj["metadata"]["name"]
            spec = obj.get("spec", {})
            if rt.group == "scheduling.x-k8s.io":
                row(
                    obj,
                    name,
                    int(spec.get("minMember", 0)),
                    lambda p, n=name: p["metadata"].get("labels", {}).get(POD_GROUP_LABEL) == n,
                )
            elif rt.plural == "podgroups":
                policy = spec.get("schedulingPolicy") or {}
                if "basic" in policy and "gang" not in policy:
                    continue  # a basic-policy group: no gang
                gang = policy.get("gang") or {}
                row(
                    obj,
                    name,
                    int(gang.get("minCount", 0)),
                    lambda p, n=name: (
                        (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == n
                    ),
                )
            elif rt.version == "v1alpha1":
                for group in spec.get("podGroups", []):
                    gang = (group.get("policy") or {}).get("gang")
                    if gang is None:
                        continue
                    pg = group.get("name", "")
                    row(
                        obj,
                        f"{name}/{pg}",
                        int(gang.get("minCount", 0)),
                        lambda p, n=name, g=pg: (
                            (p["spec"].get("workloadRef") or {}).get("name") == n
                            and (p["spec"].get("workloadRef") or {}).get("podGroup") == g
                        ),
                    )
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
