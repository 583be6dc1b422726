"""What a chaos run is judged on, read from the cluster and the server's write ledger.

The four invariants (any of them non-zero fails the run):

- ``lost``: pods still pending at the end while there was room for them. Room is
  each existing node's allocatable CPU, memory and pod count minus the requests of
  the pods bound to it. A plain pod is lost if it fits on some node; a gang's pending
  members are lost (all of them) if they fit together — checked by first-fit
  decreasing, which may miss a packing that exists, so it can only under-count, and
  the workload leaves far more room than that matters for. Malformed objects are left
  out; so are members of a PodGroup that does not exist at the end (gated by design).
- ``double_bound``: pods (by UID) with more than one accepted binding, plus bindings
  to a node name the cluster never had. A binding that lands on a node deleted
  before it arrived is counted apart (``bound_to_deleted_node``): the scheduler
  decided while the node existed, the API server accepts such a binding as upstream
  does, and the pod garbage collector removes the pod.
- ``partial_gangs``: PodGroups with 0 < bound members < ``minMember`` at the end.
- ``partial_gangs_held``: gangs left partly bound by a leader killed mid-gang while
  every node was cordoned (``room_taken_mid_gang``) whose bound members still held
  their resources when the nodes came back, long past the group's timeout: gang
  recovery must have evicted them (docs/gangs.md, "Gangs left partly bound").
- ``writes_without_lease``: writes (other than to the Lease itself) the server
  accepted from a replica that did not hold the Lease when the request arrived: the
  identity in the request's User-Agent is not the Lease's ``holderIdentity``.
  A write that arrived while its sender held the Lease but was answered after the
  Lease moved (an injected delay held it in the server) is counted apart as
  ``late_writes``: fencing decides when a write is sent, not when the server applies
  it (docs/operations.md, "Leader election and fencing").
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from troupe.api.gangs import POD_GROUP_LABEL
from troupe.api.quantity import QuantityError, to_int, to_milli
from troupe.sim.apiserver.ledger import WriteLedger
from troupe.sim.apiserver.store import Obj, Store

from bench.chaos.workload import KIND_LABEL, NAMESPACE, PODGROUPS

_IDENTITY = re.compile(r"\(([^()]*)\)\s*$")
INVARIANTS = (
    "lost",
    "double_bound",
    "partial_gangs",
    "partial_gangs_held",
    "writes_without_lease",
)


@dataclass
class Room:
    cpu: int
    memory: int
    pods: int

    def fits(self, need: tuple[int, int]) -> bool:
        return self.pods >= 1 and self.cpu >= need[0] and self.memory >= need[1]

    def take(self, need: tuple[int, int]) -> None:
        self.cpu, self.memory, self.pods = self.cpu - need[0], self.memory - need[1], self.pods - 1


def requests(pod: Obj) -> tuple[int, int] | None:
    """(milli-CPU, memory bytes) the pod requests; None if a quantity does not parse."""
    cpu = memory = 0
    try:
        for container in pod["spec"].get("containers") or []:
            asked = (container.get("resources") or {}).get("requests") or {}
            cpu += to_milli(str(asked.get("cpu", "0")))
            memory += to_int(str(asked.get("memory", "0")))
    except (QuantityError, ValueError):
        return None
    return max(cpu, 0), max(memory, 0)


def free_room(store: Store) -> dict[str, Room]:
    room = {}
    for node in store.list("nodes", copy=False):
        alloc = node["status"]["allocatable"]
        room[node["metadata"]["name"]] = Room(
            to_milli(alloc["cpu"]), to_int(alloc["memory"]), to_int(alloc["pods"])
        )
    for pod in store.list("pods", copy=False):
        node = pod["spec"].get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        need = requests(pod)
        if node in room and phase not in ("Succeeded", "Failed") and need is not None:
            room[node].take(need)
    return room


def fit_all(room: dict[str, Room], needs: list[tuple[int, int]]) -> bool:
    """Whether every need fits at once (first-fit decreasing on a copy of ``room``)."""
    left = {name: Room(r.cpu, r.memory, r.pods) for name, r in room.items()}
    for need in sorted(needs, reverse=True):
        node = next((r for r in left.values() if r.fits(need)), None)
        if node is None:
            return False
        node.take(need)
    return True


def _is_pending(pod: Obj) -> bool:
    return not pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp")


def cluster_verdict(store: Store) -> dict[str, Any]:
    """``lost``, ``partial_gangs`` and the counts they are taken from, as now."""
    pods, malformed_bound = [], []
    for p in store.list("pods", NAMESPACE, copy=False):
        if (p["metadata"].get("labels") or {}).get(KIND_LABEL) != "malformed":
            pods.append(p)
        elif p["spec"].get("nodeName"):
            malformed_bound.append(p["metadata"]["name"])
    groups = {
        g["metadata"]["name"]: g
        for g in store.list(PODGROUPS, NAMESPACE, copy=False)
        if not g["metadata"]["name"].startswith("bad-")
    }
    room = free_room(store)
    members: defaultdict[str, list[Obj]] = defaultdict(list)
    lost = pending = ungrouped = 0
    lost_names: list[str] = []
    for pod in pods:
        group = (pod["metadata"].get("labels") or {}).get(POD_GROUP_LABEL)
        if group:
            members[group].append(pod)
            continue
        if _is_pending(pod):
            pending += 1
            need = requests(pod)
            if need is not None and any(r.fits(need) for r in room.values()):
                lost += 1
                lost_names.append(pod["metadata"]["name"])
    partial = 0
    for name, group_pods in members.items():
        waiting = [p for p in group_pods if _is_pending(p)]
        pending += len(waiting)
        if name not in groups:
            ungrouped += len(waiting)
            continue
        bound = sum(1 for p in group_pods if p["spec"].get("nodeName"))
        min_member = int(groups[name]["spec"].get("minMember") or 1)
        if 0 < bound < min_member:
            partial += 1
        needs = [n for n in (requests(p) for p in waiting) if n is not None]
        if waiting and fit_all(room, needs):
            lost += len(waiting)
            lost_names.extend(p["metadata"]["name"] for p in waiting)
    return {
        "pods": len(pods),
        "gangs": len(groups),
        "pending": pending,
        "pending_without_podgroup": ungrouped,
        "lost": lost,
        "partial_gangs": partial,
        "examples_lost": sorted(lost_names)[:10],
        "malformed_bound": sorted(malformed_bound),
    }


def identity_of(user_agent: str) -> str:
    """The lease identity ``troupe run`` puts in its User-Agent comment ("" if none)."""
    match = _IDENTITY.search(user_agent)
    return match.group(1) if match else ""


def ledger_verdict(ledger: WriteLedger, nodes_ever: set[str]) -> dict[str, Any]:
    per_uid = Counter(b.uid for b in ledger.bindings)
    never = [b for b in ledger.bindings if not b.node_existed and b.node not in nodes_ever]
    gone = [b for b in ledger.bindings if not b.node_existed and b.node in nodes_ever]
    writes = [w for w in ledger.writes if "/leases" not in w.path]
    without = [w for w in writes if identity_of(w.user_agent) != w.holder_at_arrival]
    late = [
        w for w in writes if identity_of(w.user_agent) == w.holder_at_arrival != w.holder_at_commit
    ]
    return {
        "double_bound": sum(1 for n in per_uid.values() if n > 1) + len(never),
        "bound_to_deleted_node": len(gone),
        "bindings": len(ledger.bindings),
        "writes": len(writes),
        "writes_without_lease": len(without),
        "late_writes": len(late),
        "examples_without_lease": [
            f"{w.method} {w.path} from {identity_of(w.user_agent) or w.user_agent!r} "
            f"while {w.holder_at_arrival or 'nobody'} held the Lease"
            for w in without[:5]
        ],
    }
