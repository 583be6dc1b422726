"""The work a chaos run gives troupe, and the controllers a real cluster would run.

All of it lives in namespace ``chaos`` and is written straight into the embedded
store (the harness and the API server share a process): plain pods in waves, and
gangs — scheduler-plugins PodGroups (``minMember`` the gang size, sometimes one
less; a short ``scheduleTimeoutSeconds``) with members labelled
``scheduling.x-k8s.io/pod-group``, 3 to 50 of them. Requests are small against the
nodes so the cluster keeps room for every gang to complete; above
``Settings.target_cpu_share`` of the cluster's CPU the oldest work is retired
(deleted, as a finished Job would be cleaned up).

``Workload`` keeps the desired state and ``reconcile`` plays the controllers:

- a desired pod or PodGroup that is gone (the pod garbage collector took it with its
  node, a fault deleted it) is created again under the same name, as a Job or an
  operator would; a PodGroup held back by a fault stays deleted until its hold ends;
- pods bound to a node that no longer exists are deleted, as the pod garbage
  collector deletes orphaned pods (a binding may land after its node was deleted).

``Tracker`` follows bindings through a store listener, so a fault can fire right
after the k-th member of a gang was bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from troupe.api.gangs import POD_GROUP_LABEL
from troupe.sim.apiserver.machinery.errors import ApiError
from troupe.sim.apiserver.storage.store import Obj, Store

from bench.chaos.plan import Settings

NAMESPACE: Final = "chaos"
KIND_LABEL: Final = "chaos.troupe.dev/kind"
PODGROUPS: Final = "podgroups.scheduling.x-k8s.io"
_MILLI: Final = {"50m": 50, "100m": 100, "150m": 150, "200m": 200, "250m": 250}


def pod(name: str, cpu: str, memory: str, kind: str, group: str = "") -> Obj:
    labels = {KIND_LABEL: kind}
    if group:
        labels[POD_GROUP_LABEL] = group
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "schedulerName": "troupe-scheduler",
            "containers": [
                {
                    "name": "c",
                    "image": "pause",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
    }


def pod_group(name: str, min_member: Any, **spec: Any) -> Obj:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"minMember": min_member, **spec},
    }


@dataclass(frozen=True, slots=True)
class Gang:
    name: str
    members: tuple[str, ...]
    min_member: int
    cpu_milli: int


class Workload:
    def __init__(self, store: Store, rng: random.Random, settings: Settings) -> None:
        self.store = store
        self.rng = rng
        self.settings = settings
        self.pods: dict[str, Obj] = {}  # desired, by name
        self.groups: dict[str, Obj] = {}
        self.gangs: dict[str, Gang] = {}
        self.held: dict[str, float] = {}  # PodGroup name -> loop time it may come back
        self.malformed: set[str] = set()  # pod and PodGroup names
        self.created = {"pods": 0, "gangs": 0, "recreated_pods": 0, "retired_pods": 0}
        self._serial = 0
        self._order: list[str] = []  # plain pods and gangs, oldest first
        self._cpu: dict[str, int] = {}  # milli-CPU of each item of _order

    def _next(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}-{self._serial:04d}"

    def _create(self, kind: str, obj: Obj) -> None:
        # Already there: a controller raced a fault; both want it to exist.
        with contextlib.suppress(ApiError):
            self.store.create(kind, obj)

    def plain_wave(self, count: int) -> list[str]:
        names = []
        for _ in range(count):
            name = self._next("p")
            cpu = self.rng.choice(("50m", "100m", "200m"))
            memory = self.rng.choice(("64Mi", "128Mi", "256Mi"))
            self.pods[name] = pod(name, cpu, memory, "plain")
            self._create("pods", self.pods[name])
            self._order.append(name)
            self._cpu[name] = _MILLI[cpu]
            names.append(name)
        self.created["pods"] += count
        return names

    def gang(self, size: int | None = None) -> Gang:
        size = size or self.rng.choice((3, 4, 6, 8, 12, 16, 24, 32, 50))
        name = self._next("g")
        cpu = self.rng.choice(("50m", "100m", "150m"))
        min_member = size - 1 if size > 4 and self.rng.random() < 0.25 else size
        timeout = self.rng.choice((3, 5, 10))
        self.groups[name] = pod_group(name, min_member, scheduleTimeoutSeconds=timeout)
        self._create(PODGROUPS, self.groups[name])
        members = tuple(f"{name}-{i:02d}" for i in range(size))
        for member in members:
            self.pods[member] = pod(member, cpu, "128Mi", "gang", group=name)
            self._create("pods", self.pods[member])
        gang = Gang(name, members, min_member, _MILLI[cpu])
        self.gangs[name] = gang
        self._order.append(name)
        self._cpu[name] = _MILLI[cpu] * size
        self.created["pods"] += size
        self.created["gangs"] += 1
        return gang

    def add_malformed(self, objects: list[tuple[str, Obj]]) -> None:
        """Objects no scheduler can use; created once, never recreated or retired."""
        for kind, obj in objects:
            self.malformed.add(obj["metadata"]["name"])
            self._create(kind, obj)

    def delete_pod(self, name: str) -> None:
        with contextlib.suppress(ApiError):
            self.store.delete("pods", name, NAMESPACE, grace_period_seconds=0)

    def recreate_pod(self, name: str) -> None:
        """Delete a pod and create it again at once under its name (a new UID)."""
        self.delete_pod(name)
        self._create("pods", self.pods[name])
        self.created["recreated_pods"] += 1

    def delete_group(self, name: str) -> None:
        with contextlib.suppress(ApiError):
            self.store.delete(PODGROUPS, name, NAMESPACE)

    def hold_group(self, name: str, seconds: float) -> None:
        """Delete a PodGroup and keep it deleted for ``seconds``."""
        self.held[name] = asyncio.get_running_loop().time() + seconds
        self.delete_group(name)

    def recreate_gang(self, gang: Gang) -> None:
        self.delete_group(gang.name)
        for member in gang.members:
            self.delete_pod(member)
        self._create(PODGROUPS, self.groups[gang.name])
        for member in gang.members:
            self._create("pods", self.pods[member])
        self.created["recreated_pods"] += len(gang.members)

    def cluster_milli_cpu(self) -> int:
        nodes = self.store.list("nodes", copy=False)
        return sum(_milli(n["status"]["allocatable"]["cpu"]) for n in nodes)

    def retire(self) -> int:
        """Delete the oldest work until what is desired is under the target share of
        the cluster's CPU; returns the pods deleted."""
        budget = self.settings.target_cpu_share * self.cluster_milli_cpu()
        deleted = 0
        while self._order and sum(self._cpu.values()) > budget:
            item = self._order.pop(0)
            self._cpu.pop(item)
            gang = self.gangs.pop(item, None)
            names = list(gang.members) if gang is not None else [item]
            if gang is not None:
                self.groups.pop(item)
                self.held.pop(item, None)
                self.delete_group(item)
            for name in names:
                self.pods.pop(name)
                # A graceful delete: the kubelet finishes it, as a Job's cleanup.
                with contextlib.suppress(ApiError):
                    self.store.delete("pods", name, NAMESPACE)
            deleted += len(names)
        self.created["retired_pods"] += deleted
        return deleted

    def reconcile(self) -> None:
        """One pass of the controllers (see the module docstring)."""
        now = asyncio.get_running_loop().time()
        pods_rt, groups_rt = self.store.resolve("pods"), self.store.resolve(PODGROUPS)
        nodes = {n["metadata"]["name"] for n in self.store.list("nodes", copy=False)}
        for name, obj in list(self.groups.items()):
            if self.held.get(name, 0.0) > now:
                continue
            self.held.pop(name, None)
            if self.store.find(groups_rt, NAMESPACE, name) is None:
                self._create(PODGROUPS, obj)
        for pod_obj in self.store.list("pods", NAMESPACE, copy=False):
            node = pod_obj["spec"].get("nodeName")
            if node and node not in nodes:
                self.delete_pod(pod_obj["metadata"]["name"])
        for name, obj in list(self.pods.items()):
            if self.store.find(pods_rt, NAMESPACE, name) is None:
                self._create("pods", obj)
                self.created["recreated_pods"] += 1


def _milli(cpu: str) -> int:
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


def cordon_all(store: Store, unschedulable: bool) -> int:
    """Mark every node unschedulable (as ``kubectl cordon`` does), or undo it; returns
    the nodes changed. Nothing new fits anywhere while they are cordoned."""
    changed = 0
    for node in store.list("nodes"):
        if bool(node["spec"].get("unschedulable")) == unschedulable:
            continue
        node["spec"]["unschedulable"] = unschedulable
        with contextlib.suppress(ApiError):
            store.update("nodes", node)
            changed += 1
    return changed


class Tracker:
    """Bound members per gang, kept current by a store listener; ``wait_bound`` wakes
    as soon as a gang has k members bound."""

    def __init__(self, store: Store) -> None:
        self.bound: defaultdict[str, set[str]] = defaultdict(set)
        self.plain_bound: set[str] = set()
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self.stop = store.listen("pods", self._on)

    def _on(self, type_: str, obj: Obj) -> None:
        meta = obj["metadata"]
        if meta.get("namespace") != NAMESPACE:
            return
        group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        bound = self.bound[group] if group else self.plain_bound
        if type_ != "DELETED" and obj["spec"].get("nodeName"):
            bound.add(meta["name"])
        else:
            bound.discard(meta["name"])
        for check, future in list(self._waiters):
            if not future.done() and check():
                future.set_result(None)

    async def until(self, check: Callable[[], bool], timeout: float) -> bool:
        if check():
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (check, future)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(future, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self._waiters.remove(entry)
