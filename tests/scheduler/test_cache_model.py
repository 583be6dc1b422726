"""The NodeTable behind the cache always equals a plain per-node model.

A hypothesis state machine adds, updates and deletes nodes and bound pods with random
quantities (huge, tiny, every suffix, e-notation, past int64, negative), labels and
taints (timestamps among them, so ids are freed and reused), through ``Cache`` as the
event handlers do. After every step the table must show exactly what a few lines of
Python compute per node from the objects: allocatable, requested (saturating at
``MAX_AMOUNT``), the non-zero requests, labels, taints in the node's order, and the
bookkeeping of interned taint rows and label ids. A node the cache refuses must leave
the table exactly as it was.

The model computes amounts from the quantity's parts (digits, suffix), not by parsing
its text, with upstream's rounding: up to a whole nano, binary suffixes capped at
2^63-1, then millicores (cpu) or units, rounding up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from troupe.api.clock import FakeClock
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Pod
from troupe.api.quantity import MAX_AMOUNT, QuantityError
from troupe.scheduler.cache import Cache

from tests.plugins.builders import make_node, make_pod

_SUFFIXES: dict[str, tuple[int, int]] = {
    "": (10, 0),
    "n": (10, -9),
    "u": (10, -6),
    "m": (10, -3),
    "k": (10, 3),
    "M": (10, 6),
    "G": (10, 9),
    "T": (10, 12),
    "P": (10, 15),
    "E": (10, 18),
    "Ki": (2, 10),
    "Mi": (2, 20),
    "Gi": (2, 30),
    "Ti": (2, 40),
    "Pi": (2, 50),
    "Ei": (2, 60),
    "e3": (10, 3),
    "E-2": (10, -2),
    "e+6": (10, 6),
    "e15": (10, 15),
    "e16": (10, 16),
    "e19": (10, 19),
    "e-12": (10, -12),
}
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Q:
    """A quantity by its parts; ``text`` is what the object carries."""

    negative: bool
    whole: int
    fraction: str
    suffix: str

    @property
    def text(self) -> str:
        dot = f".{self.fraction}" if self.fraction else ""
        return f"{'-' if self.negative else ''}{self.whole}{dot}{self.suffix}"

    def units(self, resource: str) -> int:
        """Millicores for cpu, units otherwise, as upstream rounds; may be negative."""
        base, exponent = _SUFFIXES[self.suffix]
        value = Fraction(f"{self.whole}.{self.fraction or '0'}") * Fraction(base) ** exponent
        if base == 2:
            value = min(value, Fraction(_INT64_MAX))
        nanos = math.ceil(value * 10**9)  # up to a whole nano
        per_unit = 10**6 if resource == "cpu" else 10**9
        magnitude = -(-nanos // per_unit)
        return -magnitude if self.negative and magnitude else magnitude


_NOTABLE = [
    Q(False, 1, "", "e19"),  # example.com/widgets: "1e19"
    Q(False, 9, "3", "e15"),  # 9.3e15 cores
    Q(False, 1, "", "e16"),  # exactly the limit, in units
    Q(False, 10, "", "P"),
    Q(False, 10, "", "T"),  # the cpu limit, in cores
    Q(False, 10**16 + 1, "", ""),
    Q(False, _INT64_MAX, "", ""),
    Q(False, 9, "", "Ei"),  # capped at 2^63-1 by the parser
    Q(False, 8, "", "Pi"),
    Q(False, 1, "", "n"),
    Q(False, 0, "5", "m"),
    Q(False, 64, "", ""),
    Q(True, 2, "", ""),
    Q(False, 0, "", ""),
]

quantities = st.one_of(
    st.sampled_from(_NOTABLE),
    st.builds(
        Q,
        negative=st.sampled_from([False, False, False, True]),
        whole=st.integers(0, 10**6) | st.integers(0, 10**20),
        fraction=st.sampled_from(["", "5", "25", "001", "999999999999"]),
        suffix=st.sampled_from(list(_SUFFIXES)),
    ),
)
NODE_RESOURCES = ["cpu", "memory", "pods", "example.com/widgets", "hugepages-1Gi"]
POD_RESOURCES = ["cpu", "memory", "example.com/widgets"]
NODES = ["n0", "n1", "n2", "n3"]
PODS = ["p0", "p1", "p2", "p3", "p4", "p5"]
label_values = st.sampled_from(["a", "b", "", "gpu"]) | st.integers(0, 10**9).map(str)
labels = st.dictionaries(st.sampled_from(["zone", "pool", "ts", "example.com/x"]), label_values)
taint_values = st.sampled_from(["", "gpu"]) | st.integers(1_700_000_000, 1_700_000_100).map(str)
taints = st.lists(
    st.tuples(
        st.sampled_from(["dedicated", "DeletionCandidateOfClusterAutoscaler", "ToBeDeleted"]),
        taint_values,
        st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
    ),
    max_size=3,
)


@dataclass
class NodeModel:
    allocatable: dict[str, int]
    labels: dict[str, str]
    taints: list[tuple[str, str, str]]
    unschedulable: bool


@dataclass
class PodModel:
    pod: Pod
    node: str
    requests: dict[str, int] = field(default_factory=dict)
    nonzero: tuple[int, int] = (0, 0)


def node_model(allocatable: dict[str, Q], capacity: dict[str, Q]) -> dict[str, int] | None:
    """What the node offers, or None when troupe must refuse it."""
    out = {name: q.units(name) for name, q in allocatable.items()}
    out.update({name: q.units(name) for name, q in capacity.items() if name not in allocatable})
    if any(v < 0 or v > MAX_AMOUNT for v in out.values()):
        return None
    return out


def pod_model(pod: Pod, node: str, requests: dict[str, Q]) -> PodModel | None:
    """What a bound pod counts for, or None when its quantities are unusable."""
    units = {name: q.units(name) for name, q in requests.items()}
    if any(v < 0 for v in units.values()):
        return None
    capped = {name: min(v, MAX_AMOUNT) for name, v in units.items() if v}
    cpu = min(units["cpu"], MAX_AMOUNT) if "cpu" in units else 100
    memory = min(units["memory"], MAX_AMOUNT) if "memory" in units else 200 * 2**20
    return PodModel(pod, node, capped, (cpu, memory))


def snapshot(table: NodeTable) -> dict[str, Any]:
    """Everything a write could change, copied."""
    taint_rows, label_columns = table._taints, table._labels
    return {
        "arrays": [
            a.copy()
            for a in (
                table.present,
                table.unschedulable,
                table.allocatable,
                table.requested,
                table.nonzero_requested,
                table.taints,
            )
        ],
        "labels": {k: c.copy() for k, c in table.labels.items()},
        "scalars": (table.size, table.generation, table.node_generation, table.pod_count),
        "lists": (
            list(table.names),
            dict(table.index),
            list(table.nodes),
            list(table.node_taints),
            list(table.resources),
            list(table.taint_list),
            {k: list(v) for k, v in table.label_values.items()},
            [dict(p) for p in table.pods],
        ),
        "interning": (
            list(taint_rows._refs),
            dict(taint_rows._ids),
            list(taint_rows._free),
            {k: list(v) for k, v in label_columns._refs.items()},
            dict(label_columns._key_refs),
            list(label_columns._held),
        ),
    }


def same_snapshot(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if len(a["arrays"]) != len(b["arrays"]) or a["labels"].keys() != b["labels"].keys():
        return False
    arrays = all(np.array_equal(x, y) for x, y in zip(a["arrays"], b["arrays"], strict=True))
    columns = all(np.array_equal(a["labels"][k], b["labels"][k]) for k in a["labels"])
    rest = ("scalars", "lists", "interning")
    return arrays and columns and all(a[k] == b[k] for k in rest)


class CacheMatchesModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cache = Cache(FakeClock(), table=NodeTable(capacity=2))
        self.nodes: dict[str, NodeModel] = {}
        self.pods: dict[str, PodModel] = {}
        self.peak_taint_ids = 0

    # --- nodes -------------------------------------------------------------------

    @rule(
        name=st.sampled_from(NODES),
        allocatable=st.dictionaries(st.sampled_from(NODE_RESOURCES), quantities, max_size=4),
        capacity=st.dictionaries(st.sampled_from(NODE_RESOURCES), quantities, max_size=2),
        node_labels=labels,
        node_taints=taints,
        unschedulable=st.booleans(),
    )
    def add_or_update_node(
        self,
        name: str,
        allocatable: dict[str, Q],
        capacity: dict[str, Q],
        node_labels: dict[str, str],
        node_taints: list[tuple[str, str, str]],
        unschedulable: bool,
    ) -> None:
        builder = make_node().name(name).labels(node_labels).unschedulable(unschedulable)
        for key, value, effect in node_taints:
            builder = builder.taint(key, value, effect)  # type: ignore[arg-type]
        node = builder.allocatable({r: q.text for r, q in allocatable.items()}).obj()
        node.status.capacity = {r: q.text for r, q in capacity.items()}
        offered = node_model(allocatable, capacity)
        before = snapshot(self.cache.table)
        try:
            if name in self.cache.table.index:
                self.cache.update_node(node)
            else:
                self.cache.add_node(node)
        except QuantityError as err:
            assert offered is None, f"refused a usable node: {err}"
            assert name in str(err)
            assert same_snapshot(before, snapshot(self.cache.table)), "a refusal changed the table"
            # The event handlers take a known node out when a version is unusable.
            self.cache.remove_node(name)
            self.nodes.pop(name, None)
            return
        assert offered is not None, f"accepted {allocatable=} {capacity=}"
        self.nodes[name] = NodeModel(offered, dict(node_labels), node_taints, unschedulable)

    @rule(name=st.sampled_from(NODES))
    def delete_node(self, name: str) -> None:
        self.cache.remove_node(name)
        self.nodes.pop(name, None)

    # --- bound pods --------------------------------------------------------------

    @rule(
        name=st.sampled_from(PODS),
        node=st.sampled_from(NODES),
        requests=st.dictionaries(st.sampled_from(POD_RESOURCES), quantities, max_size=3),
    )
    def bind_or_resize_pod(self, name: str, node: str, requests: dict[str, Q]) -> None:
        pod = make_pod().name(name).resources({r: q.text for r, q in requests.items()})
        bound = pod.node(node).obj()
        known = self.pods.get(name)
        if known is not None and known.node == node:
            problem = self.cache.update_pod(known.pod, bound)
        else:
            problem = self.cache.add_pod(bound)
        model = pod_model(bound, node, requests)
        capped = any(q.units(r) > MAX_AMOUNT for r, q in requests.items())
        # A problem is told when the pod is (re)counted, not for an unchanged spec.
        recounted = known is None or known.node != node or known.pod.spec != bound.spec
        assert (problem is not None) == (recounted and (model is None or capped)), problem
        if model is None:
            self.pods.pop(name, None)
        else:
            self.pods[name] = model

    @rule(name=st.sampled_from(PODS))
    def delete_pod(self, name: str) -> None:
        known = self.pods.pop(name, None)
        if known is not None:
            self.cache.remove_pod(known.pod)

    # --- the table equals the model ------------------------------------------------

    @invariant()
    def nodes_match(self) -> None:
        table = self.cache.table
        assert set(table.index) == set(self.nodes)
        for name, model in self.nodes.items():
            slot = table.index[name]
            assert table.present[slot] and table.names[slot] == name
            for row, resource in enumerate(table.resources):
                assert table.allocatable[row, slot] == model.allocatable.get(resource, 0)
            assert bool(table.unschedulable[slot]) == model.unschedulable
            shown = {k: table.label_value(slot, k) for k in table.labels}
            assert {k: v for k, v in shown.items() if v is not None} == model.labels
            carried = [table.taint_list[t] for t in table.node_taints[slot]]
            assert [(t.key, t.value, t.effect) for t in carried] == model.taints

    @invariant()
    def requested_matches(self) -> None:
        table = self.cache.table
        for name in self.nodes:
            slot = table.index[name]
            on_node = [p for p in self.pods.values() if p.node == name]
            for row, resource in enumerate(table.resources):
                total = len(on_node) if resource == "pods" else None
                if total is None:
                    total = min(sum(p.requests.get(resource, 0) for p in on_node), MAX_AMOUNT)
                assert table.requested[row, slot] == total, (name, resource)
            for i in range(2):
                nonzero = min(sum(p.nonzero[i] for p in on_node), MAX_AMOUNT)
                assert table.nonzero_requested[i, slot] == nonzero
        free = ~table.present
        assert not table.allocatable[:, free].any() and not table.requested[:, free].any()

    @invariant()
    def taint_rows_are_counted_and_reused(self) -> None:
        table = self.cache.table
        rows = table._taints
        carriers: dict[int, set[int]] = {}
        counts: dict[int, int] = {}
        for name in self.nodes:
            slot = table.index[name]
            for tid in table.node_taints[slot]:
                carriers.setdefault(tid, set()).add(slot)
                counts[tid] = counts.get(tid, 0) + 1
        assert table.live_taint_ids() == sorted(carriers)
        for tid in range(table.taints.shape[0]):
            expected = np.zeros(table.capacity, dtype=bool)
            expected[list(carriers.get(tid, ()))] = True
            assert np.array_equal(table.taints[tid], expected), f"row {tid}"
            if tid < len(table.taint_list):
                assert rows.refs(tid) == counts.get(tid, 0)
        for tid in carriers:
            assert rows.id_of(table.taint_list[tid]) == tid
        # Ids are reused: never more than were live at once (plus one node's worth,
        # counted before the taints it drops are released).
        self.peak_taint_ids = max(self.peak_taint_ids, len(carriers))
        assert len(table.taint_list) <= self.peak_taint_ids + 3

    @invariant()
    def label_columns_are_counted(self) -> None:
        table = self.cache.table
        keys = {k for model in self.nodes.values() for k in model.labels}
        assert set(table.labels) == keys
        for key, column in table.labels.items():
            assert not (column[~table.present] != -1).any()
            values = {m.labels[key] for m in self.nodes.values() if key in m.labels}
            for value in values:
                lid = table.label_id(key, value)
                assert lid is not None and table.label_values[key][lid] == value
                holders = sum(1 for m in self.nodes.values() if m.labels.get(key) == value)
                assert table._labels.refs(key, lid) == holders
            # Ids are reused: at most one per node, plus one counted before a release.
            assert len(table.label_values[key]) <= len(NODES) + 1


TestCacheMatchesModel = CacheMatchesModel.TestCase
TestCacheMatchesModel.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_the_model_rounds_like_upstream() -> None:
    # The model's arithmetic on a few values whose upstream results are known.
    assert Q(False, 0, "5", "m").units("cpu") == 1  # 0.5m rounds up to 1m
    assert Q(False, 1, "", "n").units("memory") == 1
    assert Q(False, 9, "", "Ei").units("memory") == _INT64_MAX
    assert Q(False, 1, "5", "Gi").units("memory") == 1536 * 2**20
    assert Q(False, 9, "3", "e15").units("cpu") == 93 * 10**17
