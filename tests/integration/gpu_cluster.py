"""The GPU cluster of issue 30's walkthrough, as API objects: 12 nodes of 8 GPUs in 3
racks (tainted ``nvidia.com/gpu``), 20 CPU-only nodes; rack r0 full (4 bound pods of
8 GPUs), rack r1 half used (2), rack r2 empty; and a rack-constrained v1beta1 gang of
members of 32 cpu, 384Gi and 8 GPUs. With 8 members the best rack holds 4: the
cheapest fix is 4 more nodes like gpu-8 in rack r2, and no rack holds 64 GPUs.

Used by the explain tests both through the store of an in-process ``SimCluster`` and
as YAML applied with kubectl to ``troupe sim --serve``."""

from __future__ import annotations

from typing import Any

import yaml

RACK = "example.com/rack"
GPU = "nvidia.com/gpu"
NAMESPACE = "ml"
TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}


def gpu_node(i: int, rack: str | None = None) -> dict[str, Any]:
    name = f"gpu-{i}"
    alloc = {"cpu": "96", "memory": "1Ti", "pods": "110", GPU: "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, RACK: rack or f"r{i // 4}"},
        },
        "spec": {"taints": [TAINT]},
        "status": {"capacity": alloc, "allocatable": alloc},
    }


def cpu_node(i: int) -> dict[str, Any]:
    name = f"cpu-{i}"
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": alloc, "allocatable": alloc},
    }


def gpu_pod(name: str, node: str = "", group: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "troupe-scheduler",
        "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "trainer",
                "image": "trainer",
                "resources": {
                    "requests": {"cpu": "32", "memory": "384Gi", GPU: "8"},
                    "limits": {GPU: "8"},
                },
            }
        ],
    }
    if node:
        spec["nodeName"] = node
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def rack_gang(name: str, min_count: int, pods: int) -> list[dict[str, Any]]:
    group = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": min_count}},
            "schedulingConstraints": {"topology": [{"key": RACK}]},
        },
    }
    return [group, *(gpu_pod(f"{name}-{i}", group=name) for i in range(pods))]


def cluster_objects() -> list[dict[str, Any]]:
    """The namespace, the nodes and the bound pods (no gang yet)."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    ]
    objects += [gpu_node(i) for i in range(12)]
    objects += [cpu_node(i) for i in range(20)]
    objects += [gpu_pod(f"llama-{i}", f"gpu-{i}") for i in range(4)]
    objects += [gpu_pod(f"ft-{i}", f"gpu-{4 + i}") for i in range(2)]
    return objects


RESOURCE = {
    "Namespace": "namespaces",
    "Node": "nodes",
    "Pod": "pods",
    "PodGroup": "podgroups.scheduling.k8s.io",
}


def create(store: Any, objects: list[dict[str, Any]]) -> None:
    """Create ``objects`` through an embedded API server's store."""
    for obj in objects:
        store.create(RESOURCE[obj["kind"]], obj)


def as_yaml(objects: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False)
