"""NodeTable: the columnar view of every node that Filter and Score plugins read.

One slot per node; each attribute a numpy column over all slots, so a plugin filters
or scores every node with a few vector operations instead of a Python call per node
(DESIGN.md "Batch-first Filter and Score"). Free slots (deleted nodes) have
``present == False`` and are reused; masks returned by plugins are always
``capacity`` long.

``troupe.scheduler.cache`` owns the table and is the only writer (nodes from the
informers, pods assumed, bound and forgotten). A scheduling cycle runs without
yielding to the event loop, so the live table *is* the cycle's snapshot: nothing can
change it mid-cycle and no copy is taken. ``generation`` changes on every write and
``node_generation`` only when the node set, labels or taints change, so plugins can
cache what they derive from node attributes alone.

Every write is whole or not at all: ``add_node`` and ``update_node`` compute the
node's allocatable (the one step that can fail, with a QuantityError naming the node
and field) before touching anything, so a node troupe cannot hold leaves the table
exactly as it was. Amounts are bounded by ``MAX_AMOUNT`` (troupe.api.quantity): a
node's allocatable and a pod's requests are at most that, and a node's requested total
saturates there (the node is full of that resource; the exact total is recounted from
its pods whenever it is near the bound, so taking pods off restores it exactly).
Taints and labels are interned and reference-counted (troupe.api.interning): a taint
row or label id no node carries any more is cleared and reused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from troupe.api.interning import ABSENT, LabelColumns, TaintRows
from troupe.api.objects import Node, NodeSelector, NodeSelectorTerm, PodKey, Taint
from troupe.api.podinfo import HostPort, PodInfo, PodRecord
from troupe.api.quantity import MAX_AMOUNT
from troupe.api.resources import CPU, MEMORY, PODS, ResourceVector, node_allocatable
from troupe.api.selectors import node_selector_term_is_valid, requirement_matches

PodChange = tuple[int, int, PodRecord]
"""(+1 added / -1 removed, slot, what the log keeps of the pod).

A record, not the PodInfo: the log outlives the pods it names (up to
``_MAX_CHANGES`` entries), and a PodInfo would keep each deleted Pod alive with it."""

# What ``_pods_total`` sums for the two rows of ``nonzero_requested``.
_NONZERO_CPU = "(nonzero cpu)"
_NONZERO_MEMORY = "(nonzero memory)"

_MIN_CHANGES = 1 << 12
_MAX_CHANGES = 1 << 16

BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]
IndexArray = NDArray[np.intp]

_INT64_MAX = 2**63 - 1


def summable(values: IntArray) -> NDArray[Any]:
    """``values`` in a form whose sums along the last axis cannot overflow: the array
    itself when int64 holds any such sum (every real cluster), else Python ints.

    Amounts are at most ``MAX_AMOUNT`` each, so a sum over one node's resources is
    safe, but one over thousands of nodes at the bound would wrap silently in numpy."""
    terms = values.shape[-1] if values.ndim else 1
    peak = int(np.abs(values).max(initial=0))
    if peak * max(terms, 1) <= _INT64_MAX:
        return values
    return values.astype(object)


def _requirement_predicate(operator: str, values: list[str]) -> Callable[[str | None], bool]:
    def matches(value: str | None) -> bool:
        return requirement_matches(operator, values, value)

    return matches


def _same_scheduling_view(a: Node, b: Node) -> bool:
    return (
        a.metadata.labels == b.metadata.labels
        and a.spec == b.spec
        and a.status.allocatable == b.status.allocatable
        and a.status.capacity == b.status.capacity
    )


class NodeTable:
    def __init__(self, capacity: int = 64) -> None:
        self.capacity = max(1, capacity)
        c = self.capacity
        self.size = 0
        self.names: list[str] = [""] * c
        self.index: dict[str, int] = {}
        self.nodes: list[Node | None] = [None] * c
        self.present: BoolArray = np.zeros(c, dtype=bool)
        self.unschedulable: BoolArray = np.zeros(c, dtype=bool)
        self.resources: list[str] = [CPU, MEMORY, PODS]
        self.resource_index: dict[str, int] = {r: i for i, r in enumerate(self.resources)}
        self.allocatable: IntArray = np.zeros((3, c), dtype=np.int64)
        self.requested: IntArray = np.zeros((3, c), dtype=np.int64)
        # Requests as scoring sees them (cpu, memory): containers without requests
        # count upstream's defaults (100m, 200Mi) so empty pods still spread.
        self.nonzero_requested: IntArray = np.zeros((2, c), dtype=np.int64)
        self._labels = LabelColumns(c)
        self._taints = TaintRows(c)
        # Taint ids of each node in the node's own order (first untolerated wins).
        self.node_taints: list[tuple[int, ...]] = [()] * c
        self.pods: list[dict[PodKey, PodInfo]] = [{} for _ in range(c)]
        # Where each accounted pod is (preemption finds a group's members by it).
        self._pod_slots: dict[PodKey, int] = {}
        self.pod_count = 0
        self.ports: list[Counter[HostPort]] = [Counter() for _ in range(c)]
        # Pods with any (anti-)affinity term, by key -> slot (upstream
        # HavePodsWithAffinityList), so InterPodAffinity need not scan all pods.
        self.affinity_pods: dict[PodKey, int] = {}
        self.generation = 0
        self.node_generation = 0
        # Append-only log of pod accounting changes (+1/-1, slot, record) with absolute
        # sequence numbers, so plugins keep incremental per-selector counts
        # (``changes_since``) instead of rescanning every pod in every cycle.
        self._changes: list[PodChange] = []
        self._changes_base = 0
        self._free: list[int] = list(range(c - 1, -1, -1))

    # --- reading -------------------------------------------------------------------

    @property
    def labels(self) -> dict[str, NDArray[np.int32]]:
        """Label key -> value id of each slot (-1: no such label); only keys some node
        carries have a column."""
        return self._labels.columns

    @property
    def label_values(self) -> dict[str, list[str]]:
        """Label key -> value of each id (an id no slot holds keeps a stale value)."""
        return self._labels.values

    @property
    def taints(self) -> BoolArray:
        """``taints[taint id, slot]``: whether the node carries the taint. Rows of ids
        no node carries (and spare rows past them) are all False."""
        return self._taints.matrix

    @property
    def taint_list(self) -> list[Taint]:
        """The taint of each id (a free id keeps a stale taint no node carries)."""
        return self._taints.taints

    def live_taint_ids(self) -> list[int]:
        """Ids of the taints some node carries, in id order."""
        return self._taints.live()

    def slots(self) -> IndexArray:
        """Slots holding a node, in slot order."""
        return np.flatnonzero(self.present)

    def slot(self, name: str) -> int | None:
        return self.index.get(name)

    def node(self, slot: int) -> Node:
        node = self.nodes[slot]
        if node is None:
            raise KeyError(f"slot {slot} holds no node")
        return node

    def resource_row(self, resource: str) -> int:
        """Row of ``resource``, adding an all-zero row the first time it is seen
        (e.g. ``nvidia.com/gpu`` requested before any node offers it)."""
        row = self.resource_index.get(resource)
        if row is None:
            row = len(self.resources)
            self.resources.append(resource)
            self.resource_index[resource] = row
            zeros = np.zeros((1, self.capacity), dtype=np.int64)
            self.allocatable = np.vstack([self.allocatable, zeros])
            self.requested = np.vstack([self.requested, zeros])
        return row

    def request_vector(self, requests: Mapping[str, int]) -> IntArray:
        """A pod's requests as a column aligned with the resource rows (pods = 1)."""
        rows = [(self.resource_row(r), v) for r, v in requests.items()]
        vec = np.zeros(len(self.resources), dtype=np.int64)
        for row, value in rows:
            vec[row] = value
        vec[self.resource_index[PODS]] = 1
        return vec

    def label_mask(self, key: str, matches: Callable[[str | None], bool]) -> BoolArray:
        """Slots whose label ``key`` satisfies ``matches(value)`` (None: absent).

        ``matches`` runs once per distinct value, not once per node."""
        column = self.labels.get(key)
        if column is None:
            return np.full(self.capacity, matches(None), dtype=bool)
        vocab = self.label_values[key]
        lookup = np.fromiter((matches(v) for v in [None, *vocab]), dtype=bool, count=len(vocab) + 1)
        return lookup[column + 1]

    def node_selector_term_mask(self, term: NodeSelectorTerm) -> BoolArray:
        """Slots matching one term (expressions ANDed); an empty term matches none."""
        if (not term.match_expressions and not term.match_fields) or not (
            node_selector_term_is_valid(term)
        ):
            # Upstream: an empty or unparsable term matches no node.
            return np.zeros(self.capacity, dtype=bool)
        mask = self.present.copy()
        for req in term.match_expressions:
            mask &= self.label_mask(req.key, _requirement_predicate(req.operator, req.values))
        for req in term.match_fields:
            # Only metadata.name is a node field selectors may use; others read "".
            names = self.names if req.key == "metadata.name" else [""] * self.capacity
            mask &= np.fromiter(
                (requirement_matches(req.operator, req.values, n) for n in names),
                dtype=bool,
                count=self.capacity,
            )
        return mask

    def node_selector_mask(self, selector: NodeSelector) -> BoolArray:
        """Slots matching any of the selector's terms."""
        mask = np.zeros(self.capacity, dtype=bool)
        for term in selector.node_selector_terms:
            mask |= self.node_selector_term_mask(term)
        return mask

    def pod_slot(self, key: PodKey) -> int | None:
        """The slot of the node the pod with ``key`` is accounted on, if any."""
        return self._pod_slots.get(key)

    def label_id(self, key: str, value: str) -> int | None:
        """The id ``value`` of label ``key`` has in its column, if a node has it."""
        return self._labels.id_of(key, value)

    def label_value(self, slot: int, key: str) -> str | None:
        column = self.labels.get(key)
        if column is None or column[slot] == ABSENT:
            return None
        return self.label_values[key][int(column[slot])]

    # --- writing: nodes ----------------------------------------------------------

    def add_node(self, node: Node) -> int:
        """Add ``node`` (update it, if known); its slot. Raises QuantityError, leaving
        the table as it was, when its allocatable cannot be used."""
        name = node.metadata.name
        if name in self.index:
            self.update_node(node)
            return self.index[name]
        allocatable = node_allocatable(node)  # the one step that can fail: first
        if not self._free:
            self._grow()
        slot = self._free.pop()
        self.index[name] = slot
        self.names[slot] = name
        self.present[slot] = True
        self.size += 1
        self._write_node(slot, node, allocatable)
        return slot

    def update_node(self, node: Node) -> None:
        """Raises QuantityError, leaving the table (and the node's old version in it)
        as it was, when the new allocatable cannot be used."""
        slot = self.index.get(node.metadata.name)
        if slot is None:
            self.add_node(node)
            return
        old = self.nodes[slot]
        if old is not None and _same_scheduling_view(old, node):
            # Heartbeats and condition updates change nothing a plugin reads:
            # keep derived caches (keyed on node_generation) valid.
            self.nodes[slot] = node
            return
        self._write_node(slot, node, node_allocatable(node))

    def remove_node(self, name: str) -> list[PodInfo]:
        """Free the node's slot; returns the pods that were accounted on it."""
        slot = self.index.pop(name, None)
        if slot is None:
            return []
        pods = list(self.pods[slot].values())
        for key in self.pods[slot]:
            self.affinity_pods.pop(key, None)
            if self._pod_slots.get(key) == slot:
                del self._pod_slots[key]
        self.pod_count -= len(pods)
        self.names[slot] = ""
        self.nodes[slot] = None
        self.present[slot] = False
        self.unschedulable[slot] = False
        self.allocatable[:, slot] = 0
        self.requested[:, slot] = 0
        self.nonzero_requested[:, slot] = 0
        self._labels.set(slot, {})
        self._taints.set(slot, self.node_taints[slot], ())
        self.node_taints[slot] = ()
        self.pods[slot] = {}
        self.ports[slot] = Counter()
        self.size -= 1
        self._free.append(slot)
        self._forget_changes()
        self.generation += 1
        self.node_generation += 1
        return pods

    def _write_node(self, slot: int, node: Node, allocatable: ResourceVector) -> None:
        # Nothing here can fail on the node's content (its amounts were checked).
        rows = [(self.resource_row(r), amount) for r, amount in allocatable.items()]
        old = self.nodes[slot]
        self.nodes[slot] = node
        self.unschedulable[slot] = node.spec.unschedulable
        self.allocatable[:, slot] = 0  # after resource_row, which may grow the arrays
        for row, amount in rows:
            self.allocatable[row, slot] = amount
        # Most updates change one of allocatable, labels or taints: keep the others.
        if old is None or old.metadata.labels != node.metadata.labels:
            self._labels.set(slot, node.metadata.labels)
        if old is None or old.spec.taints != node.spec.taints:
            taints = self._taints.set(slot, self.node_taints[slot], node.spec.taints)
            self.node_taints[slot] = taints
        self.generation += 1
        self.node_generation += 1

    def _grow(self) -> None:
        old, new = self.capacity, self.capacity * 2
        extra = new - old

        def pad(a: NDArray[np.generic], fill: int | bool = 0) -> NDArray[np.generic]:
            shape = (*a.shape[:-1], extra)
            return np.concatenate([a, np.full(shape, fill, dtype=a.dtype)], axis=-1)

        self.present = pad(self.present, False).astype(bool)
        self.unschedulable = pad(self.unschedulable, False).astype(bool)
        self.allocatable = pad(self.allocatable).astype(np.int64)
        self.requested = pad(self.requested).astype(np.int64)
        self.nonzero_requested = pad(self.nonzero_requested).astype(np.int64)
        self._taints.grow_slots(new)
        self._labels.grow_slots(new)
        self.names.extend([""] * extra)
        self.nodes.extend([None] * extra)
        self.node_taints.extend([()] * extra)
        self.pods.extend({} for _ in range(extra))
        self.ports.extend(Counter() for _ in range(extra))
        self._free.extend(range(new - 1, old - 1, -1))
        self.capacity = new

    # --- writing: pods -----------------------------------------------------------

    def add_pod(self, info: PodInfo, node_name: str) -> bool:
        """Account ``info`` on ``node_name``; False when the node is unknown."""
        slot = self.index.get(node_name)
        if slot is None:
            return False
        self.pods[slot][info.key] = info
        self._pod_slots[info.key] = slot
        self.pod_count += 1
        self._account(info, slot, 1)
        self._log(1, slot, info.record)
        if info.host_ports:
            self.ports[slot].update(info.host_ports)
        if info.has_affinity:
            self.affinity_pods[info.key] = slot
        return True

    def remove_pod(self, info: PodInfo, node_name: str) -> bool:
        """Stop accounting the pod with ``info``'s key on ``node_name``; False when it
        was not there. What was accounted (the stored PodInfo) is taken back, so
        the requests and the log stay symmetric whichever PodInfo the caller has."""
        slot = self.index.get(node_name)
        if slot is None:
            return False
        stored = self.pods[slot].pop(info.key, None)
        if stored is None:
            return False
        if self._pod_slots.get(info.key) == slot:
            del self._pod_slots[info.key]
        self.pod_count -= 1
        self._account(stored, slot, -1)
        self._log(-1, slot, stored.record)
        if stored.host_ports:
            self.ports[slot].subtract(stored.host_ports)
            self.ports[slot] = +self.ports[slot]
        self.affinity_pods.pop(stored.key, None)
        return True

    def _account(self, info: PodInfo, slot: int, sign: int) -> None:
        """Add (sign 1) or take back (-1) what ``info`` requests; ``pods[slot]``
        already says whether it is there.

        Each amount saturates at ``MAX_AMOUNT``. A saturated cell no longer knows its
        exact total, so at (or past) the bound the total is recounted from the node's
        pods; below it plain addition is exact. (Inlined: this runs for every pod
        assumed, bound and forgotten.)"""
        limit = MAX_AMOUNT
        for resource, value in info.requests.items():
            row = self.resource_row(resource)  # may grow the arrays: index after
            requested = self.requested
            cell = requested.item(row, slot)
            total = cell + sign * value
            if cell >= limit or total > limit:
                total = min(self._pods_total(slot, resource), limit)
            requested[row, slot] = total
        self.requested[self.resource_index[PODS], slot] += sign
        nonzero = self.nonzero_requested
        for row, value, what in (
            (0, info.nonzero_cpu, _NONZERO_CPU),
            (1, info.nonzero_memory, _NONZERO_MEMORY),
        ):
            cell = nonzero.item(row, slot)
            total = cell + sign * value
            if cell >= limit or total > limit:
                total = min(self._pods_total(slot, what), limit)
            nonzero[row, slot] = total
        self.generation += 1

    def _pods_total(self, slot: int, what: str) -> int:
        pods = self.pods[slot].values()
        if what == _NONZERO_CPU:
            return sum(p.nonzero_cpu for p in pods)
        if what == _NONZERO_MEMORY:
            return sum(p.nonzero_memory for p in pods)
        return sum(p.requests.get(what, 0) for p in pods)

    @property
    def change_seq(self) -> int:
        """Sequence number of the next pod change; a reader stores it as its position."""
        return self._changes_base + len(self._changes)

    def changes_since(self, seq: int) -> list[PodChange] | None:
        """Pod changes from ``seq`` on, or None when they were trimmed (or a node was
        removed since): the reader must recompute from ``pods`` then."""
        if seq < self._changes_base:
            return None
        return self._changes[seq - self._changes_base :]

    def _log(self, sign: int, slot: int, record: PodRecord) -> None:
        self._changes.append((sign, slot, record))
        # A reader further behind than there are pods recounts from ``pods`` for less
        # than replaying the log would cost, so the log holds about as many changes as
        # there are pods (twice as many before a trim, half of that after it): what
        # it keeps of deleted pods is bounded by the live cluster, not by the churn.
        limit = min(_MAX_CHANGES, max(_MIN_CHANGES, 2 * self.pod_count))
        if len(self._changes) > limit:
            drop = len(self._changes) // 2
            del self._changes[:drop]
            self._changes_base += drop

    def _forget_changes(self) -> None:
        # Slot reuse would make old entries point at another node. Skipping one
        # sequence number makes even a fully caught-up reader see None and recount.
        self._changes_base += len(self._changes) + 1
        self._changes.clear()

    def pods_on(self, slots: Iterable[int]) -> Iterable[PodInfo]:
        for slot in slots:
            yield from self.pods[slot].values()
