"""What each node of an embedded cluster has allocatable and what its bound pods
request, per resource: the numbers behind ``troupe replay``'s utilisation table and
the heatmap of the HTML report (``troupe.sim.report``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from troupe.api.objects import Node, Pod
from troupe.api.quantity import format_quantity
from troupe.api.resources import node_allocatable, pod_requests
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import RACK_LABEL, ZONE_LABEL

Obj = dict[str, Any]
TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
SHOWN_RESOURCES: Final = ("cpu", "memory", "pods")


def shown(resource: str) -> bool:
    """cpu, memory, pods and GPUs: what the utilisation tables and the heatmap show."""
    return resource in SHOWN_RESOURCES or "gpu" in resource


def format_amount(resource: str, amount: int) -> str:
    """An amount in ``node_allocatable``'s units (cpu in millicores) as a user writes it."""
    if resource == "cpu":
        return f"{amount / 1000:g}"
    if resource == "memory":
        return format_quantity(amount, binary=True)
    return str(amount)


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """One node: allocatable and requested (by its bound, unfinished pods) per resource,
    in ``node_allocatable``'s units (cpu in millicores, memory in bytes)."""

    name: str
    zone: str = ""
    rack: str = ""
    allocatable: dict[str, int] = field(default_factory=dict)
    requested: dict[str, int] = field(default_factory=dict)


def node_usage(cluster: SimCluster, pods: list[Obj] | None = None) -> list[NodeUsage]:
    """Every node of ``cluster`` by name, with what ``pods`` (default: the cluster's)
    bound to it request; pods that finished hold nothing."""
    store = cluster.store
    if pods is None:
        pods = store.list("pods", copy=False)
    nodes = sorted(store.list("nodes", copy=False), key=lambda n: n["metadata"]["name"])
    requested: dict[str, dict[str, int]] = {n["metadata"]["name"]: {} for n in nodes}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if not node or node not in requested:
            continue
        if pod.get("status", {}).get("phase") in TERMINAL_PHASES:
            continue
        on_node = requested[node]
        # Counted as the scheduler counts a bound pod (a request past MAX_AMOUNT at it).
        for resource, amount in pod_requests(Pod.model_validate(pod), cap=True).items():
            on_node[resource] = on_node.get(resource, 0) + amount
        on_node["pods"] = on_node.get("pods", 0) + 1
    out = []
    for n in nodes:
        name = n["metadata"]["name"]
        labels = n["metadata"].get("labels") or {}
        out.append(
            NodeUsage(
                name=name,
                zone=str(labels.get(ZONE_LABEL, "")),
                rack=str(labels.get(RACK_LABEL, "")),
                allocatable=dict(node_allocatable(Node.model_validate(n))),
                requested=requested[name],
            )
        )
    return out
