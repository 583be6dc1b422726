"""NodeTable: slots, growth, resources added as they appear, label masks, the change log."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.nodetable import NodeTable
from troupe.api.objects import NodeSelectorRequirement, NodeSelectorTerm
from troupe.api.podinfo import PodInfo

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
