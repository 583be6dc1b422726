"""``troupe explain``'s view of a cluster, and its what-if runs.

``read_cluster`` reads what one scheduling attempt depends on (nodes, pods,
namespaces, PriorityClasses, PodDisruptionBudgets and every gang object, at the first
version the cluster serves of each gang API) into a ``ClusterState`` of plain JSON
objects. ``attempt`` loads a state into a fresh embedded cluster and runs the same
``SchedulerDaemon`` (the same profile, the same code) against it until the target
pod or group is either bound or rejected once; the rejection is the scheduler's own
structured diagnosis (``troupe.scheduler.observe.explain``). Nothing is written to the
real cluster: the what-if copies (``with_clones``, ``with_min_count``, ``without_pods``) are changed
and tried in their own embedded cluster.

Only the target's pending pods are copied, with every pod already bound: the attempt
is the one the target would get next, not the outcome of the whole queue.
"""

from __future__ import annotations

import asyncio
import copy
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from troupe.api.config import ResolvedConfig
from troupe.api.gangs import POD_GROUP_LABEL
from troupe.kube import KubeConnectionError, connect
from troupe.kube.transport import HttpTransport
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.sim.cluster import SimCluster

Obj = dict[str, Any]

CORE_LISTS = {
    "namespaces": "/api/v1/namespaces",
    "priorityclasses": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "nodes": "/api/v1/nodes",
    "poddisruptionbudgets": "/apis/policy/v1/poddisruptionbudgets",
    "pods": "/api/v1/pods",
}
# Per gang resource, the versions tried newest first; the first served is read.
GANG_VERSIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("scheduling.x-k8s.io", "podgroups"): ("v1alpha1",),
    ("scheduling.k8s.io", "workloads"): ("v1beta1", "v1alpha3", "v1alpha2", "v1alpha1"),
    ("scheduling.k8s.io", "podgroups"): ("v1beta1", "v1alpha2"),
    ("scheduling.k8s.io", "compositepodgroups"): ("v1alpha3",),
}
_DROP_META = ("resourceVersion", "uid", "managedFields", "generation", "selfLink")


class ExplainError(RuntimeError):
    pass


@dataclass
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
        raise ExplainError(f"expected {shape}, got {text!r}")

    @property
    def display(self) -> str:
        return "/".join(p for p in (self.namespace, self.name, self.sub) if p)


@dataclass
class ClusterState:
    # Collection path (as read, also where the copy is created) -> objects.
    lists: dict[str, list[Obj]] = field(default_factory=dict)

    def of(self, suffix: str) -> list[Obj]:
        out: list[Obj] = []
        for path, objs in self.lists.items():
            if path.endswith("/" + suffix):
                out.extend(objs)
        return out

    @property
    def nodes(self) -> list[Obj]:
        return self.lists.get(CORE_LISTS["nodes"], [])

    @property
    def pods(self) -> list[Obj]:
        return self.lists.get(CORE_LISTS["pods"], [])

    def copy(self) -> ClusterState:
        return ClusterState(copy.deepcopy(self.lists))

    # --- the target ---------------------------------------------------------------

    def group_object(self, target: Target) -> tuple[str, Obj] | None:
        """(collection path, object) of the target group, any API (newest first)."""
        for path in sorted(self.lists, key=_api_rank):
            if "/api/v1/" in path or path.endswith(("priorityclasses", "poddisruptionbudgets")):
                continue
            for obj in self.lists[path]:
                meta = obj["metadata"]
                if meta.get("namespace") == target.namespace and meta["name"] == target.name:
                    return path, obj
        return None

    def group_names(self, target: Target) -> set[str]:
        """The target group's name and, for a CompositePodGroup, the names of every
        PodGroup and CompositePodGroup under it (``spec.parentCompositePodGroupName``)."""
        names = {target.name}
        children = [
            o
            for path, objs in self.lists.items()
            if path.startswith("/apis/scheduling.k8s.io/") and path.endswith("podgroups")
            for o in objs
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

    def _in_group(self, pod: Obj, target: Target, names: set[str]) -> bool:
        return target.kind == "podgroup" and bool(names & _groups_named(pod, target.sub))

    def members(self, target: Target) -> list[Obj]:
        """The target's pods that are not bound (for a pod: itself)."""
        names = self.group_names(target) if target.kind == "podgroup" else set()
        out = []
        for pod in self.pods:
            meta, spec = pod["metadata"], pod.get("spec", {})
            if meta.get("namespace") != target.namespace or spec.get("nodeName"):
                continue
            if _terminal(pod):
                continue
            if target.kind == "pod":
                if meta["name"] == target.name:
                    out.append(pod)
            elif self._in_group(pod, target, names):
                out.append(pod)
        return out

    def bound_members(self, target: Target) -> list[Obj]:
        names = self.group_names(target) if target.kind == "podgroup" else set()
        return [
            p
            for p in self.pods
            if p["metadata"].get("namespace") == target.namespace
            and p.get("spec", {}).get("nodeName")
            and not _terminal(p)
            and self._in_group(p, target, names)
        ]

    # --- what-if copies -------------------------------------------------------------

    def with_clones(self, node_name: str, count: int) -> tuple[ClusterState, list[str]]:
        """A copy with ``count`` more nodes like ``node_name`` (same labels, taints and
        allocatable; their own names)."""
        state = self.copy()
        nodes = state.lists[CORE_LISTS["nodes"]]
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
            labels = clone["metadata"].setdefault("labels", {})
            if "kubernetes.io/hostname" in labels:
                labels["kubernetes.io/hostname"] = name
            nodes.append(clone)
            names.append(name)
        return state, names

    def without_pods(self, keys: set[str]) -> ClusterState:
        """A copy without the pods ``keys`` ("NS/NAME"): moved elsewhere, or deleted."""
        state = self.copy()
        pods = state.lists[CORE_LISTS["pods"]]
        pods[:] = [
            p
            for p in pods
            if f"{p['metadata'].get('namespace')}/{p['metadata']['name']}" not in keys
        ]
        return state

    def with_min_count(self, target: Target, min_count: int) -> ClusterState | None:
        """A copy whose target group asks for ``min_count`` (None: no such field)."""
        state = self.copy()
        found = state.group_object(target)
        if found is None:
            return None
        _, obj = found
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


def _api_rank(path: str) -> tuple[int, str]:
    # The native PodGroup first, then Workloads, then the scheduler-plugins PodGroup.
    order = ("scheduling.k8s.io", "scheduling.x-k8s.io")
    for i, group in enumerate(order):
        if f"/apis/{group}/" in path:
            return (i, "0" if path.endswith("podgroups") else path)
    return (9, path)


def _terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _groups_named(pod: Obj, sub: str) -> set[str]:
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


# --- reading a cluster -----------------------------------------------------------------


async def read_cluster(
    kubeconfig: str | None, master: str | None, in_cluster: bool
) -> ClusterState:
    try:
        api = await connect(kubeconfig, master, in_cluster, pool_size=2)
    except KubeConnectionError as exc:
        raise ExplainError(str(exc)) from exc
    try:
        transport = HttpTransport(api)
        state = ClusterState()

        async def get(path: str) -> list[Obj] | None:
            resp = await transport.request("GET", path)
            if resp.status == 404:
                return None
            if not resp.ok:
                raise ExplainError(f"GET {path}: {resp.status} {resp.body[:200]!r}")
            items: list[Obj] = json.loads(resp.body).get("items") or []
            kind = json.loads(resp.body).get("kind", "").removesuffix("List")
            version = json.loads(resp.body).get("apiVersion", "")
            for item in items:
                item.setdefault("kind", kind)
                item.setdefault("apiVersion", version)
            return items

        for key, path in CORE_LISTS.items():
            items = await get(path)
            if items is None and key in ("nodes", "pods"):
                raise ExplainError(f"GET {path}: not found")
            state.lists[path] = items or []
        for (group, plural), versions in GANG_VERSIONS.items():
            for version in versions:
                path = f"/apis/{group}/{version}/{plural}"
                items = await get(path)
                if items is not None:
                    state.lists[path] = items
                    break
        return state
    finally:
        await api.close()


# --- one attempt in an embedded cluster ------------------------------------------------


@dataclass
class Outcome:
    bound: bool
    # The scheduler's structured diagnosis of the target's rejection (None: bound).
    diagnosis: dict[str, Any] | None
    nodes: dict[str, str] = field(default_factory=dict)  # pod key -> node, when bound


def _clean(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {})
    for key in _DROP_META:
        meta.pop(key, None)
    return obj


def _collection(path: str, obj: Obj) -> str:
    """Where ``obj`` read from the all-namespaces list ``path`` is created."""
    ns = obj["metadata"].get("namespace")
    if not ns:
        return path
    prefix, _, plural = path.rpartition("/")
    return f"{prefix}/namespaces/{ns}/{plural}"


async def attempt(
    config: ResolvedConfig, state: ClusterState, target: Target, timeout: float = 20.0
) -> Outcome:
    """Load ``state`` (bound pods and the target's pending pods only) into an embedded
    cluster, run the scheduler on it, and return how the target's first attempt ended."""
    members = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in state.members(target)
    }
    if not members:
        raise ExplainError(f"{target.kind} {target.display} has no pending pod")
    sim = SimCluster(heartbeat=None, bookmark_interval=0.5)
    await sim.start()
    daemon: SchedulerDaemon | None = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = sim.write_kubeconfig(Path(tmp) / "kubeconfig")
            api = await connect(str(kubeconfig), None, False, pool_size=2)
            try:
                await _load(HttpTransport(api), state, members)
            finally:
                await api.close()
            daemon = SchedulerDaemon(
                config, Connection(kubeconfig=str(kubeconfig)), seed=1, sync_timeout=timeout
            )
            await daemon.start()
            return await _until_settled(sim, daemon, target, members, timeout)
    finally:
        if daemon is not None:
            await daemon.stop(grace=0.5)
        await sim.stop()


async def _load(transport: HttpTransport, state: ClusterState, members: set[str]) -> None:
    for path, objs in state.lists.items():
        for obj in objs:
            if path == CORE_LISTS["pods"]:
                key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
                bound = obj.get("spec", {}).get("nodeName") and not _terminal(obj)
                if not bound and key not in members:
                    continue
            body = _clean(obj)
            if path == CORE_LISTS["pods"] and key in members:
                body.pop("status", None)
                body["spec"].pop("nodeName", None)
            resp = await transport.request(
                "POST", _collection(path, obj), body=json.dumps(body).encode()
            )
            if resp.status == 409:  # a namespace the embedded cluster starts with
                continue
            if not resp.ok:
                raise ExplainError(
                    f"cannot copy {obj.get('kind', '')} {obj['metadata'].get('name')}: "
                    f"{resp.status} {resp.body[:300]!r}"
                )


async def checked(
    config: ResolvedConfig, state: ClusterState, target: Target, fix: dict[str, Any]
) -> dict[str, Any] | None:
    """``fix`` as shown, once the scheduler run on ``state`` (a modified copy) binds the
    target: with ``verified``, ``checkSeconds`` and the ``placement``. None when it does
    not bind there (the fix is then not suggested)."""
    start = time.perf_counter()
    outcome = await attempt(config, state, target)
    if not outcome.bound:
        return None
    return {
        **fix,
        "verified": True,
        "checkSeconds": round(time.perf_counter() - start, 2),
        "placement": outcome.nodes,
    }


async def _until_settled(
    sim: SimCluster,
    daemon: SchedulerDaemon,
    target: Target,
    members: set[str],
    timeout: float,
) -> Outcome:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    first_bound: float | None = None
    explain: Callable[[], dict[str, Any] | None] = lambda: daemon.explain(  # noqa: E731
        target.kind, target.namespace, target.name, target.sub
    )
    while True:
        found = explain()
        if found is not None:
            return Outcome(False, found)
        nodes = {}
        for key in members:
            ns, name = key.split("/", 1)
            pod = sim.store.find(sim.store.resolve("pods"), ns, name)
            node = (pod or {}).get("spec", {}).get("nodeName")
            if node:
                nodes[key] = node
        if len(nodes) == len(members):
            return Outcome(True, None, nodes)
        if nodes and first_bound is None:
            first_bound = loop.time()
        if first_bound is not None and loop.time() > first_bound + 2.0:
            # The quorum bound; the other members wait (not a rejection of the group).
            return Outcome(True, None, nodes)
        if loop.time() > deadline:
            raise ExplainError(f"the scheduler made no attempt at {target.display} in {timeout:g}s")
        await asyncio.sleep(0.02)
