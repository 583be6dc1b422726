"""Watching what the embedded API server commits, for gang invariant tests.

``PodLedger`` listens to every pod change in the store (synchronously, in commit
order) and records:

* violations of "a pod's nodeName never changes once set" and "a pod UID is bound
  at most once";
* violations of node capacity (cpu, memory, pods) at any moment, summing the
  requests of the non-terminal pods bound to each node after every change;
* which pods were deleted by the simulated pod garbage collector.

``accepted_bindings`` reads the server's audit log: how many ``pods/binding``
POSTs the server answered with success, per pod.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from troupe.api.quantity import resource_to_int
from troupe.sim.apiserver.server import AuditRecord
from troupe.sim.cluster import SimCluster

RESOURCES = ("cpu", "memory", "pods")
_BINDING_PATH = re.compile(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """Sum of the containers' requests, plus one pod (no init containers here)."""
    total = {"cpu": 0, "memory": 0, "pods": 1}
    for container in pod["spec"].get("containers", []):
        for name, value in (container.get("resources", {}).get("requests") or {}).items():
            if name in total:
                total[name] += resource_to_int(name, str(value))
    return total


def node_allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    alloc = node["status"]["allocatable"]
    return {r: resource_to_int(r, str(alloc[r])) for r in RESOURCES}


class PodLedger:
    def __init__(self, cluster: SimCluster) -> None:
        self.allocatable = {
            n["metadata"]["name"]: node_allocatable(n) for n in cluster.store.list("nodes")
        }
        self.removed: set[str] = set()
        self.first_node: dict[str, str] = {}  # uid -> the node it was first bound to
        self.bound_count: Counter[str] = Counter()  # uid -> transitions to bound
        self.violations: list[str] = []
        self.names: dict[str, str] = {}  # uid -> namespace/name
        self._placed: dict[str, tuple[str, dict[str, int]]] = {}  # uid -> node, requests
        self._node_of: dict[str, str] = {}  # uid -> last nodeName seen
        self.stop = cluster.store.listen("pods", self._on)

    def _on(self, type_: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        uid = meta["uid"]
        self.names[uid] = f"{meta['namespace']}/{meta['name']}"
        node = obj["spec"].get("nodeName") or ""
        previous = self._node_of.get(uid, "")
        if node and not previous and type_ != "DELETED":
            self.bound_count[uid] += 1
            self.first_node.setdefault(uid, node)
        if previous and node != previous:
            self.violations.append(f"{self.names[uid]}: nodeName {previous!r} -> {node!r}")
        self._node_of[uid] = node
        terminal = (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if type_ == "DELETED" or terminal or not node:
            self._placed.pop(uid, None)
        else:
            self._placed[uid] = (node, pod_requests(obj))
        if node and node in self.allocatable and node not in self.removed:
            self._check(node)

    def _check(self, node: str) -> None:
        used = {r: 0 for r in RESOURCES}
        for where, requests in self._placed.values():
            if where == node:
                for r in RESOURCES:
                    used[r] += requests[r]
        for r in RESOURCES:
            if used[r] > self.allocatable[node][r]:
                self.violations.append(
                    f"node {node} over {r}: {used[r]} > {self.allocatable[node][r]}"
                )

    def twice(self) -> list[str]:
        return [self.names[uid] for uid, n in self.bound_count.items() if n > 1]

    def on_removed_node(self) -> list[tuple[str, str]]:
        """(namespace, name) of live pods bound to a removed node."""
        out = []
        for uid, (node, _) in self._placed.items():
            if node in self.removed:
                ns, name = self.names[uid].split("/")
                out.append((ns, name))
        return out


def accepted_bindings(audit: Iterable[AuditRecord]) -> Counter[str]:
    """namespace/name -> successful ``pods/binding`` answers."""
    out: Counter[str] = Counter()
    for record in audit:
        match = _BINDING_PATH.search(record.path)
        if record.method == "POST" and match and 200 <= record.code < 300:
            out[f"{match.group(1)}/{match.group(2)}"] += 1
    return out
