"""A cluster's state as the what-if engine sees it, and the target of ``troupe explain``.

``ClusterState`` wraps a ``Snapshot`` (as ``troupe.whatif.read`` reads it, or a file):
it finds the target's group object and pods (any gang API; a CompositePodGroup's
members are the pods of its PodGroups), makes the modified copies the fixes are
checked on (``with_clones``, ``with_min_count``, ``without_pods``) and the snapshot one
attempt at the target is loaded from (``for_attempt``). Nothing here writes to a
cluster. Called by ``troupe.whatif.attempt``, ``fit``, ``fixes`` and ``free``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from troupe.api.gangs import POD_GROUP_LABEL
from troupe.sim.snapshot_file import Snapshot
from troupe.sim.usage import TERMINAL_PHASES
from troupe.whatif.errors import WhatIfError

Obj = dict[str, Any]
# Where a group object is looked for, first match wins: the native PodGroup, the
# CompositePodGroup, the Workloads, then the scheduler-plugins PodGroup.
GROUP_RESOURCES: Final = ("podgroups", "compositepodgroups", "workloads", "coschedulingpodgroups")


@dataclass(frozen=True)
class Target:
    kind: str  # "pod" or "podgroup"
    namespace: str
    name: str
    # A Workload's pod group (and replica): "podGroup[/replica]".
    sub: str = ""

    @classmethod
    def parse(cls, kind: str, text: str) -> Target:
        parts = text.split("/")
        if kind == "pod" and len(parts) == 2 and all(parts):
            return cls(kind, parts[0], parts[1])
        if kind == "podgroup" and 2 <= len(parts) <= 4 and all(parts):
            return cls(kind, parts[0], parts[1], "/".join(parts[2:]))
        shape = "NS/NAME" if kind == "pod" else "NS/NAME or NS/WORKLOAD/PODGROUP[/REPLICA]"
        raise WhatIfError(f"expected {shape}, got {text!r}")

    @property
    def display(self) -> str:
        return "/".join(p for p in (self.namespace, self.name, self.sub) if p)


def pod_key(obj: Obj) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def bound(pod: Obj) -> bool:
    """Bound to a node and not finished: it holds its requests there."""
    return bool((pod.get("spec") or {}).get("nodeName")) and not terminal(pod)


@dataclass
class ClusterState:
    snapshot: Snapshot = field(default_factory=Snapshot)

    def of(self, resource: str) -> list[Obj]:
        """The objects of one snapshot resource (``nodes``, ``pods``, ...)."""
        return self.snapshot.resources.get(resource, [])

    @property
    def nodes(self) -> list[Obj]:
        return self.of("nodes")

    @property
    def pods(self) -> list[Obj]:
        return self.of("pods")

    def copy(self) -> ClusterState:
        resources = copy.deepcopy(self.snapshot.resources)
        return ClusterState(dataclasses.replace(self.snapshot, resources=resources))

    # --- the target ---------------------------------------------------------------

    def group_object(self, target: Target) -> Obj | None:
        """The target's group object, any API (``GROUP_RESOURCES`` order)."""
        for resource in GROUP_RESOURCES:
            for obj in self.of(resource):
                meta = obj["metadata"]
                if meta.get("namespace") == target.namespace and meta["name"] == target.name:
                    return obj
        return None

    def group_names(self, target: Target) -> set[str]:
        """The target group's name and, for a CompositePodGroup, the names of every
        PodGroup and CompositePodGroup under it (``spec.parentCompositePodGroupName``)."""
        names = {target.name}
        children = [
            o
            for resource in ("podgroups", "compositepodgroups")
            for o in self.of(resource)
            if o["metadata"].get("namespace") == target.namespace
        ]
        grew = True
        while grew:
            grew = False
            for obj in children:
                parent = (obj.get("spec") or {}).get("parentCompositePodGroupName")
                if parent in names and obj["metadata"]["name"] not in names:
                    names.add(obj["metadata"]["name"])
                    grew = True
        return names

    def _target_pods(self, target: Target) -> Iterator[Obj]:
        """The target's pods that are not finished, bound or not."""
        names = self.group_names(target) if target.kind == "podgroup" else set()
        for pod in self.pods:
            if pod["metadata"].get("namespace") != target.namespace or terminal(pod):
                continue
            if target.kind == "pod":
                if pod["metadata"]["name"] == target.name:
                    yield pod
            elif names & _groups_named(pod, target.sub):
                yield pod

    def members(self, target: Target) -> list[Obj]:
        """The target's pods that are not bound (for a pod: itself)."""
        return [p for p in self._target_pods(target) if not (p.get("spec") or {}).get("nodeName")]

    def bound_members(self, target: Target) -> list[Obj]:
        if target.kind != "podgroup":
            return []
        return [p for p in self._target_pods(target) if (p.get("spec") or {}).get("nodeName")]

    def for_attempt(self, target: Target) -> Snapshot:
        """The snapshot one attempt at the target runs on: every bound pod and the
        target's pending pods (without their status), no other pending pod — the attempt
        the target would get next, not the outcome of the whole queue."""
        members = {pod_key(p) for p in self.members(target)}
        pods: list[Obj] = []
        for pod in self.pods:
            if pod_key(pod) in members:
                pod = {k: v for k, v in pod.items() if k != "status"}
                pods.append(pod)
            elif bound(pod):
                pods.append(pod)
        resources = {**self.snapshot.resources, "pods": pods}
        return dataclasses.replace(self.snapshot, resources=resources)

    # --- what-if copies -------------------------------------------------------------

    def with_clones(
        self, node_name: str, count: int, labels: dict[str, str] | None = None
    ) -> tuple[ClusterState, list[str]]:
        """A copy with ``count`` more nodes like ``node_name`` (same labels, taints and
        allocatable; their own names), with ``labels`` set on them besides."""
        state = self.copy()
        nodes = state.snapshot.resources.setdefault("nodes", [])
        model = next(n for n in nodes if n["metadata"]["name"] == node_name)
        names: list[str] = []
        taken = {n["metadata"]["name"] for n in nodes}
        i = 0
        while len(names) < count:
            name = f"{node_name}-like-{i}"
            i += 1
            if name in taken:
                continue
            clone = copy.deepcopy(model)
            clone["metadata"]["name"] = name
            own = clone["metadata"].setdefault("labels", {})
            own.update(labels or {})
            if "kubernetes.io/hostname" in own:
                own["kubernetes.io/hostname"] = name
            nodes.append(clone)
            names.append(name)
        return state, names

    def without_pods(self, keys: set[str]) -> ClusterState:
        """A copy without the pods ``keys`` ("NS/NAME"): moved elsewhere, or deleted."""
        state = self.copy()
        state.pods[:] = [p for p in state.pods if pod_key(p) not in keys]
        return state

    def with_min_count(self, target: Target, min_count: int) -> ClusterState | None:
        """A copy whose target group asks for ``min_count`` (None: no such field)."""
        state = self.copy()
        obj = state.group_object(target)
        if obj is None:
            return None
        spec = obj.setdefault("spec", {})
        if "minMember" in spec or obj.get("apiVersion", "").startswith("scheduling.x-k8s.io"):
            spec["minMember"] = min_count
            return state
        for group in spec.get("podGroups", ()):  # a Workload
            if group.get("name") == target.sub.split("/")[0]:
                gang = (group.get("policy") or {}).get("gang")
                if gang is None:
                    return None
                gang["minCount"] = min_count
                return state
        gang = (spec.get("schedulingPolicy") or {}).get("gang")
        if gang is None or "minCount" not in gang:
            return None
        gang["minCount"] = min_count
        return state


def _groups_named(pod: Obj, sub: str) -> set[str]:
    """The names of the group objects ``pod`` says it belongs to, by every API."""
    meta, spec = pod["metadata"], pod.get("spec", {})
    names = set()
    label = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
    if label:
        names.add(label)
    sg = spec.get("schedulingGroup") or {}
    if sg.get("podGroupName"):
        names.add(sg["podGroupName"])
    wr = spec.get("workloadRef") or {}
    if wr.get("name"):
        wanted = sub.split("/") if sub else []
        group_ok = not wanted or wanted[0] == wr.get("podGroup")
        if group_ok and (len(wanted) < 2 or wanted[1] == wr.get("podGroupReplicaKey", "")):
            names.add(wr["name"])
    return names
