"""What a chaos run is judged on, read from the cluster and the server's write ledger.

The invariants (any of them non-zero fails the run):

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
  accepted from a replica that did not hold the Lease when the write was accepted,
  unless they are late (below): sent after the replica's write fence had closed, or
  by a replica whose fence never closed at all. Who held the Lease is
  read from ``lease.LeaseTimeline`` (its ``holderIdentity`` while
  ``leaseDurationSeconds`` is a positive integer; nobody otherwise), the sender from
  the identity in the request's User-Agent. A replica's fence closes when it
  observes the change (its Lease watch, or its own read of the Lease) or when its
  renewals lapse (the moment they lapsed, even if it noticed later); it logs the
  moment and the writes it had let through and not seen answered (``lease.Closure``).
- ``late_writes`` (reported, not failing): such writes the replica *started* before
  its fence closed, so before it observed the change: accepted before the closure's
  moment (the ledger's clock and the replica's are the host's monotonic clock), or
  among the writes the closure names as on the wire (matched by method and path,
  each at most once). Fencing decides when a write is sent; nothing stops one in
  flight (docs/operations.md, "Leader election and fencing").
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from troupe.api.gangs import POD_GROUP_LABEL
from troupe.api.quantity import QuantityError, to_int, to_milli
from troupe.sim.apiserver.harness.ledger import WriteLedger
from troupe.sim.apiserver.storage.store import Obj, Store

from bench.chaos.lease import Closure, LeaseTimeline
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


def ledger_verdict(
    ledger: WriteLedger,
    nodes_ever: set[str],
    timeline: LeaseTimeline,
    closures: Mapping[str, Closure],
) -> dict[str, Any]:
    per_uid = Counter(b.uid for b in ledger.bindings)
    never = [b for b in ledger.bindings if not b.node_existed and b.node not in nodes_ever]
    gone = [b for b in ledger.bindings if not b.node_existed and b.node in nodes_ever]
    wire = {identity: Counter(c.on_the_wire) for identity, c in closures.items()}
    writes = without = late = 0
    examples: list[str] = []
    for index, w in enumerate(ledger.writes):
        if "/leases" in w.path:
            continue
        writes += 1
        sender, holder = identity_of(w.user_agent), timeline.holder_of(index)
        if sender and sender == holder:
            continue
        closure = closures.get(sender)
        if closure is not None and w.at < closure.at:
            late += 1  # accepted before the sender's fence closed: sent before, too
            continue
        what = f"{w.method} {w.path}"
        if sender in wire and wire[sender][what] > 0:
            wire[sender][what] -= 1  # on the wire when the fence closed
            late += 1
            continue
        without += 1
        if len(examples) < 5:
            examples.append(
                f"{what} from {sender or repr(w.user_agent)} while {holder or 'nobody'} held "
                f"the Lease" + (f" (its fence closed: {closure.reason})" if closure else "")
            )
    return {
        "double_bound": sum(1 for n in per_uid.values() if n > 1) + len(never),
        "bound_to_deleted_node": len(gone),
        "bindings": len(ledger.bindings),
        "writes": writes,
        "writes_without_lease": without,
        "late_writes": late,
        "lease_changes": timeline.changes,
        "examples_without_lease": examples,
    }
