"""Builders for group status tests: a scheduler-plugins PodGroup and its member pods."""

from __future__ import annotations

from typing import Any

from troupe.api.gangapi import CoschedulingPodGroup
from troupe.api.gangs import POD_GROUP_LABEL
from troupe.api.objects import Pod
from troupe.kube.client import rfc3339

NS = "team-a"
NOW = 1_800_000_000.0
START = rfc3339(NOW)
EARLIER = "2026-01-01T00:00:00Z"


def group(min_member: int = 3, **status: Any) -> CoschedulingPodGroup:
    return CoschedulingPodGroup.model_validate(
        {
            "metadata": {"name": "pg", "namespace": NS, "uid": "u1"},
            "spec": {"minMember": min_member},
            "status": status,
        }
    )


def pod(
    name: str,
    phase: str = "Pending",
    *,
    group_name: str = "pg",
    namespace: str = NS,
    owners: tuple[str, ...] = (),
    created: str = EARLIER,
) -> Pod:
    return Pod.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {POD_GROUP_LABEL: group_name},
                "creationTimestamp": created,
                "ownerReferences": [{"kind": "Job", "name": o, "uid": o} for o in owners],
            },
            "status": {"phase": phase},
        }
    )


def pods(*phases: str) -> list[Pod]:
    return [pod(f"p{i}", phase) for i, phase in enumerate(phases)]
