"""Builders for gang tests: group objects of the three APIs and their member pods."""

from __future__ import annotations

from typing import Any

from troupe.api.gangapi import CoschedulingPodGroup, PodGroup, Workload
from troupe.api.gangs import POD_GROUP_LABEL
from troupe.api.objects import Pod


def coscheduling_group(
    name: str,
    min_member: int,
    namespace: str = "default",
    created: str = "2026-01-01T00:00:00Z",
    **spec: Any,
) -> CoschedulingPodGroup:
    return CoschedulingPodGroup.model_validate(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}",
                "creationTimestamp": created,
            },
            "spec": {"minMember": min_member, **spec},
        }
    )


def workload(name: str, groups: dict[str, int | None], namespace: str = "default") -> Workload:
    """``groups``: pod group name -> gang minCount (None: basic policy)."""
    return Workload.model_validate(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha1",
            "kind": "Workload",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {
                "podGroups": [
                    {"name": g, "policy": {"gang": {"minCount": n}} if n else {"basic": {}}}
                    for g, n in groups.items()
                ]
            },
        }
    )


def native_group(name: str, min_count: int, namespace: str = "default") -> PodGroup:
    return PodGroup.model_validate(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
        }
    )


def member(
    group: str,
    i: int,
    cpu: str = "1",
    namespace: str = "default",
    api: str = "coscheduling",
    scheduler: str = "troupe-scheduler",
    **extra: Any,
) -> Pod:
    name = f"{group}-{i}"
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
    }
    if api == "coscheduling":
        meta["labels"] = {POD_GROUP_LABEL: group}
    elif api == "workload":
        spec["workloadRef"] = {
            "name": group,
            "podGroup": extra.pop("pod_group", "workers"),
            "podGroupReplicaKey": extra.pop("replica", ""),
        }
    else:
        spec["schedulingGroup"] = {"podGroupName": group}
    spec.update(extra)
    return Pod.model_validate({"metadata": meta, "spec": spec})
