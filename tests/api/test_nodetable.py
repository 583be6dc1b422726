"""NodeTable: slots, growth, resources added as they appear, label masks, the change log,
taints and labels interned and reused, writes that are whole or not at all, and amounts
held to MAX_AMOUNT."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.nodetable import NodeTable, summable
from troupe.api.objects import NodeSelectorRequirement, NodeSelectorTerm
from troupe.api.podinfo import PodInfo
from troupe.api.quantity import MAX_AMOUNT, QuantityError

from tests.plugins.builders import make_node, make_pod


def test_nodes_take_slots_and_deleted_slots_are_reused() -> None:
    table = NodeTable(capacity=2)
    for n in ("a", "b", "c"):
        table.add_node(make_node().name(n).capacity(cpu="1").obj())
    assert table.capacity == 4 and table.size == 3
    slot_b = table.index["b"]
    table.remove_node("b")
    assert not table.present[slot_b] and table.size == 2
    table.add_node(make_node().name("d").capacity(cpu="1").obj())
    assert table.index["d"] == slot_b


def test_an_extended_resource_gets_a_row_when_first_seen() -> None:
    table = NodeTable()
    table.add_node(make_node().name("cpu-only").capacity(cpu="2").obj())
    table.add_node(make_node().name("gpu").capacity(cpu="2").resource("nvidia.com/gpu", 4).obj())
    row = table.resource_index["nvidia.com/gpu"]
    assert table.allocatable[row, table.index["gpu"]] == 4
    assert table.allocatable[row, table.index["cpu-only"]] == 0


def test_a_pod_request_vector_counts_one_pod() -> None:
    table = NodeTable()
    vec = table.request_vector({"cpu": 500, "example.com/foo": 2})
    assert vec[table.resource_index["cpu"]] == 500
    assert vec[table.resource_index["pods"]] == 1
    assert vec[table.resource_index["example.com/foo"]] == 2


def test_label_masks_evaluate_each_distinct_value_once() -> None:
    table = NodeTable()
    for i, zone in enumerate(["a", "b", "a", ""]):
        b = make_node().name(f"n{i}").capacity(cpu="1")
        if zone:
            b = b.label("zone", zone)
        table.add_node(b.obj())
    calls: list[str | None] = []

    def is_a(value: str | None) -> bool:
        calls.append(value)
        return value == "a"

    mask = table.label_mask("zone", is_a)
    assert [table.names[s] for s in np.flatnonzero(mask)] == ["n0", "n2"]
    assert sorted(calls, key=str) == sorted([None, "a", "b"], key=str)


def test_node_selector_terms_and_match_fields() -> None:
    table = NodeTable()
    table.add_node(make_node().name("n1").label("size", "8").obj())
    table.add_node(make_node().name("n2").label("size", "2").obj())
    gt4 = NodeSelectorTerm(
        match_expressions=[NodeSelectorRequirement(key="size", operator="Gt", values=["4"])]
    )
    by_name = NodeSelectorTerm(
        match_fields=[NodeSelectorRequirement(key="metadata.name", operator="In", values=["n2"])]
    )
    invalid = NodeSelectorTerm(
        match_expressions=[NodeSelectorRequirement(key="size", operator="In", values=[])]
    )
    names = lambda m: sorted(table.names[s] for s in np.flatnonzero(m & table.present))  # noqa: E731
    assert names(table.node_selector_term_mask(gt4)) == ["n1"]
    assert names(table.node_selector_term_mask(by_name)) == ["n2"]
    assert names(table.node_selector_term_mask(invalid)) == []
    assert names(table.node_selector_term_mask(NodeSelectorTerm())) == []


def test_removing_a_node_returns_its_pods_and_resets_the_change_log() -> None:
    table = NodeTable()
    table.add_node(make_node().name("n1").capacity(cpu="4").obj())
    seq = table.change_seq
    info = PodInfo.of(make_pod().name("p").req(cpu="1").obj())
    table.add_pod(info, "n1")
    assert table.changes_since(seq) == [(1, table.index["n1"], info.record)]
    caught_up = table.change_seq
    assert table.remove_node("n1") == [info]
    assert table.changes_since(seq) is None
    assert table.changes_since(caught_up) is None  # even a reader with nothing pending


def test_the_change_log_keeps_what_readers_need_and_no_removed_pod() -> None:
    table = NodeTable()
    table.add_node(make_node().name("n1").capacity(cpu="64", pods=1000).obj())
    seq = table.change_seq
    removed = []
    for i in range(50):
        pod = (
            make_pod()
            .name(f"p{i}")
            .label("app", "web")
            .host_port(8000 + i)
            .pod_anti_affinity("zone", {"app": "web"})
            .terminating()
            .obj()
        )
        info = PodInfo.of(pod)
        table.add_pod(info, "n1")
        table.remove_pod(info, "n1")
        removed.append(weakref.ref(pod))
    del pod, info
    gc.collect()
    assert sum(1 for ref in removed if ref() is not None) == 0
    changes = table.changes_since(seq)
    assert changes is not None and [sign for sign, _, _ in changes] == [1, -1] * 50
    _, slot, record = changes[-1]
    assert changes[-2][2] is record  # an add and its remove share one record
    assert (slot, record.namespace, record.labels, record.terminating) == (
        table.index["n1"],
        "default",
        {"app": "web"},
        True,
    )
    assert record.host_ports == (("TCP", "0.0.0.0", 8049),)
    assert record.affinity is not None
    assert [t.topology_key for t in record.affinity.required_anti_affinity] == ["zone"]


@pytest.mark.parametrize(
    ("live", "kept_at_least", "kept_at_most"),
    [(10, 2048, 4096), (5000, 5000, 10002)],
    ids=["a small cluster keeps the floor", "a larger one about as many as its pods"],
)
def test_the_change_log_follows_the_live_pods_not_the_churn(
    live: int, kept_at_least: int, kept_at_most: int
) -> None:
    table = NodeTable()
    table.add_node(make_node().name("n1").capacity(cpu="640", pods=10_000).obj())
    for i in range(live):
        table.add_pod(PodInfo.of(make_pod().name(f"live-{i}").obj()), "n1")
    for i in range(10_000):  # pods that come and go: two changes each
        info = PodInfo.of(make_pod().name(f"p{i}").obj())
        table.add_pod(info, "n1")
        table.remove_pod(info, "n1")
        seq = table.change_seq
        if seq >= kept_at_least:
            assert table.changes_since(seq - kept_at_least) is not None
        if seq > kept_at_most:
            assert table.changes_since(seq - kept_at_most - 1) is None
    assert table.pod_count == live


def test_removing_with_another_podinfo_takes_back_what_was_accounted() -> None:
    table = NodeTable()
    table.add_node(make_node().name("n1").capacity(cpu="4").obj())
    placed = PodInfo.of(make_pod().name("p").req(cpu="1").label("app", "a").obj())
    table.add_pod(placed, "n1")
    seq = table.change_seq
    assert table.remove_pod(PodInfo.of(make_pod().name("p").req(cpu="3").obj()), "n1")
    assert table.requested[0, table.index["n1"]] == 0
    assert table.changes_since(seq) == [(-1, table.index["n1"], placed.record)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.booleans()), max_size=40))
def test_requested_always_equals_the_sum_of_accounted_pods(
    ops: list[tuple[int, int, bool]],
) -> None:
    table = NodeTable(capacity=2)
    for n in range(4):
        table.add_node(make_node().name(f"n{n}").capacity(cpu="100").obj())
    placed: dict[int, str] = {}
    for node, pod, add in ops:
        info = PodInfo.of(make_pod().name(f"p{pod}").req(cpu=f"{pod + 1}").obj())
        if add and pod not in placed:
            table.add_pod(info, f"n{node}")
            placed[pod] = f"n{node}"
        elif not add and pod in placed:
            table.remove_pod(info, placed.pop(pod))
    for n in range(4):
        expected = sum((p + 1) * 1000 for p, where in placed.items() if where == f"n{n}")
        assert table.requested[0, table.index[f"n{n}"]] == expected
        assert table.requested[2, table.index[f"n{n}"]] == sum(
            1 for where in placed.values() if where == f"n{n}"
        )


def test_a_heartbeat_update_keeps_node_derived_caches_valid() -> None:
    table = NodeTable()
    node = make_node().name("n1").capacity(cpu="4").label("zone", "a").obj()
    table.add_node(node)
    before = table.node_generation
    table.update_node(node.model_copy(deep=True))
    assert table.node_generation == before
    relabelled = make_node().name("n1").capacity(cpu="4").label("zone", "b").obj()
    table.update_node(relabelled)
    assert table.node_generation > before
    assert table.label_value(table.index["n1"], "zone") == "b"


# --- taints and labels interned, counted and reused ----------------------------------


def test_a_taint_no_node_carries_is_freed_and_its_row_reused_cleared() -> None:
    table = NodeTable()
    table.add_node(make_node().name("n1").taint("ts", "1700000000").obj())
    table.add_node(make_node().name("n2").obj())
    [old] = table.live_taint_ids()
    table.update_node(make_node().name("n1").taint("ts", "1700000010").obj())
    assert table.live_taint_ids() != [old] and not table.taints[old].any()
    table.update_node(make_node().name("n2").taint("other", "x", "NoExecute").obj())
    # The freed id went to the next new taint, with only its own node's bit set.
    assert table.taint_list[old].key == "other"
    assert [table.names[s] for s in np.flatnonzero(table.taints[old])] == ["n2"]
    table.remove_node("n1")
    table.remove_node("n2")
    assert table.live_taint_ids() == [] and not table.taints.any()


def test_distinct_taints_grow_the_matrix_geometrically_not_one_copy_each() -> None:
    table = NodeTable(capacity=8)
    for i in range(8):
        table.add_node(make_node().name(f"n{i}").obj())
    matrices = set()
    for value in range(1000):  # each node carries one timestamp taint at a time
        table.update_node(make_node().name(f"n{value % 8}").taint("ts", str(value)).obj())
        matrices.add(id(table.taints))
    assert len(table.live_taint_ids()) == 8
    assert table.taints.shape[0] <= 16 and len(matrices) <= 3


def test_label_values_are_reused_and_a_key_no_node_has_loses_its_column() -> None:
    table = NodeTable()
    table.add_node(make_node().name("n1").label("ts", "1").label("zone", "a").obj())
    table.add_node(make_node().name("n2").label("zone", "a").obj())
    for value in range(2, 100):
        table.update_node(make_node().name("n1").label("ts", str(value)).label("zone", "b").obj())
    assert len(table.label_values["ts"]) <= 2 and table.label_id("ts", "1") is None
    assert table.label_value(table.index["n1"], "ts") == "99"
    assert table.label_mask("zone", lambda v: v == "a").nonzero()[0].tolist() == [table.index["n2"]]
    table.update_node(make_node().name("n1").label("zone", "b").obj())
    assert "ts" not in table.labels and "ts" not in table.label_values


def test_a_node_troupe_cannot_hold_leaves_the_table_as_it_was() -> None:
    table = NodeTable(capacity=1)
    good = make_node().name("gpu-0").capacity(cpu="64").label("pool", "gpu")
    table.add_node(good.taint("dedicated", "gpu").obj())
    before = (table.capacity, table.size, table.generation, table.allocatable.copy())
    too_many = make_node().name("gpu-0").capacity(cpu="64").resource("example.com/widgets", "1e19")
    with pytest.raises(QuantityError, match=r"node gpu-0: status.allocatable\[example.com/widgets"):
        table.update_node(too_many.obj())  # no label, no taint: none of it is written
    with pytest.raises(QuantityError, match=r"node gpu-1: status.allocatable\[cpu\]"):
        table.add_node(make_node().name("gpu-1").capacity(cpu="9.3e15").obj())
    assert (table.capacity, table.size, table.generation) == before[:3]
    assert np.array_equal(table.allocatable, before[3]) and "gpu-1" not in table.index
    slot = table.index["gpu-0"]
    assert table.label_value(slot, "pool") == "gpu"
    assert [table.taint_list[t].key for t in table.node_taints[slot]] == ["dedicated"]


def test_a_requested_total_saturates_at_the_limit_and_comes_back_exactly() -> None:
    table = NodeTable()
    table.add_node(make_node().name("n1").capacity(cpu="4").resource("example.com/w", 8).obj())
    hog = PodInfo.of(make_pod().name("hog").req(cpu="1e18").obj(), cap=True)
    small = PodInfo.of(make_pod().name("small").req(cpu="2").obj())
    table.add_pod(small, "n1")
    table.add_pod(hog, "n1")
    slot, cpu = table.index["n1"], table.resource_index["cpu"]
    assert table.requested[cpu, slot] == MAX_AMOUNT
    assert table.nonzero_requested[0, slot] == MAX_AMOUNT
    table.add_pod(PodInfo.of(make_pod().name("more").req(cpu="1").obj()), "n1")
    assert table.requested[cpu, slot] == MAX_AMOUNT
    table.remove_pod(hog, "n1")
    assert table.requested[cpu, slot] == 3000 and table.nonzero_requested[0, slot] == 3000


def test_summable_keeps_sums_exact_past_int64() -> None:
    values = np.full(1000, MAX_AMOUNT, dtype=np.int64)
    assert int(summable(values).sum()) == 1000 * MAX_AMOUNT
    assert summable(values[:10]).dtype == np.int64  # no detour where int64 holds the sum
