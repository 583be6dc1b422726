"""Which nodes to buy so a gang fits (``troupe.whatif.buy``) and the capacity section's
order, on cluster states in memory. The checked runs are end to end:
tests/integration/test_explain_gpu_e2e.py."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.objects import Pod
from troupe.sim.snapshot_file import Snapshot
from troupe.whatif.buy import Purchase, domain_limit, purchases
from troupe.whatif.fit import Ask, capacity, fits
from troupe.whatif.state import ClusterState, Target

RACK = "example.com/rack"
GANG = Target("podgroup", "ml", "g")
GPU = "nvidia.com/gpu"


def node(name: str, rack: str | None, cpu: int = 96, gpus: int = 8, **spec: Any) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if rack is not None:
        labels[RACK] = rack
    alloc = {"cpu": str(cpu), "pods": "110"}
    if gpus:
        alloc[GPU] = str(gpus)
    return {"metadata": {"name": name, "labels": labels}, "spec": spec,
            "status": {"allocatable": alloc}}  # fmt: skip


def pod(name: str, node: str = "", cpu: int = 32, gpus: int = 8) -> dict[str, Any]:
    requests = {"cpu": str(cpu), GPU: str(gpus)}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": requests}}],
        "tolerations": [{"key": GPU, "operator": "Exists"}],
        "schedulingGroup": {"podGroupName": "g"},
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "ml"}, "spec": spec}


def state(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> ClusterState:
    return ClusterState(Snapshot(resources={"nodes": nodes, "pods": pods}))


def ask(needed: int, level: str = RACK, gpus: int = 8) -> Ask:
    return Ask({"cpu": 32_000, GPU: gpus}, needed, level, Pod.model_validate(pod("p")))


def issue_cluster() -> ClusterState:
    """12 nodes of 8 GPUs in 3 racks (tainted), 20 CPU-only nodes; rack r0 full,
    r1 half used, r2 empty."""
    taint = [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
    nodes = [node(f"gpu-{i}", f"r{i // 4}", taints=taint) for i in range(12)]
    nodes += [node(f"cpu-{i}", None, cpu=32, gpus=0) for i in range(20)]
    busy = [pod(f"llama-{i}", f"gpu-{i}") for i in range(4)]
    busy += [pod(f"ft-{i}", f"gpu-{4 + i}") for i in range(2)]
    for p in busy:
        p["spec"].pop("schedulingGroup")
    return state(nodes, busy)


def test_the_issue_s_rack_gang_buys_four_nodes_in_the_empty_rack() -> None:
    found = purchases(issue_cluster(), GANG, ask(8))
    best = found[0]
    assert (best.like, best.count, best.domain, best.relabel) == ("gpu-8", 4, "r2", False)
    assert best.text() == "add 4 more nodes like gpu-8 in rack r2"
    assert best.bought == {"cpu": 4 * 96_000, GPU: 32}
    # The other racks need more: 6 in r1, 8 in r0; the CPU-only nodes hold no member.
    assert [(p.domain, p.count) for p in found] == [("r2", 4), ("r1", 6), ("r0", 8)]


def test_no_rack_holds_the_gang_even_empty() -> None:
    s = issue_cluster()
    assert domain_limit(s, GANG, ask(8)) == "no rack holds 64 nvidia.com/gpu: the largest has 32"
    assert domain_limit(s, GANG, ask(4)) == ""
    assert domain_limit(s, GANG, ask(1, level="")) == ""
    # Room by totals but not by nodes: 4 GPUs free on each of 4 nodes, members of 8.
    half = state([node(f"n{i}", "r", gpus=4) for i in range(4)], [])
    assert domain_limit(half, GANG, ask(2)) == (
        "no rack holds 2 members of 32 cpu, 8 nvidia.com/gpu even empty: the only one holds 0"
    )
    unlabelled = state([node("n", None)], [])
    assert domain_limit(unlabelled, GANG, ask(1)) == (
        "no node has the label example.com/rack: no rack can hold the gang"
    )


def test_fewest_nodes_then_least_capacity_then_a_node_already_in_the_domain() -> None:
    # Rack a has one big node (16 GPUs) and one small (8); rack b one small.
    s = state([node("big", "a", gpus=16, cpu=192), node("small", "a"), node("b0", "b")], [
        pod("x", "big", gpus=16, cpu=64), pod("y", "small"), pod("z", "b0")])  # fmt: skip
    for p in s.pods:
        p["spec"].pop("schedulingGroup")
    found = purchases(s, GANG, ask(2))
    # 2 members: one big node (2 fit) beats two small ones, in either rack; in rack b
    # the big shape is relabelled there, so rack a's own big node comes first.
    assert [(p.like, p.count, p.domain, p.relabel) for p in found[:2]] == [
        ("big", 1, "a", False),
        ("big", 1, "b", True),
    ]
    assert found[1].text() == "add 1 more node like big, labelled example.com/rack=b"
    assert found[1].labels == {RACK: "b"}
    # One member: a small node buys less than a big one.
    assert (found := purchases(s, GANG, ask(1)))[0].like == "small"
    assert found[0].count == 1


def test_members_bound_pin_the_gang_to_their_rack() -> None:
    s = state([node("a0", "a"), node("b0", "b"), node("b1", "b")], [pod("m-0", "a0"), pod("m-1")])
    found = purchases(s, GANG, ask(1))
    assert {p.domain for p in found} == {"a"}


def test_a_shape_the_member_may_not_use_is_never_bought() -> None:
    taint = [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]
    s = state([node("db", None, taints=taint), node("ok", None, gpus=8)], [])
    found = purchases(s, GANG, ask(1, level=""))
    assert [p.like for p in found] == ["ok"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from([4, 8, 16]), st.integers(0, 2)),
             min_size=1, max_size=5),
    st.integers(1, 6),
)  # fmt: skip
def test_the_best_purchase_is_the_fewest_nodes_that_make_room(
    layout: list[tuple[str, int, int]], needed: int
) -> None:
    """Against brute force: no (shape, rack, count) with fewer nodes makes room for the
    members needed in one rack, and the best one does."""
    nodes, pods = [], []
    for i, (rack, gpus, used) in enumerate(layout):
        nodes.append(node(f"n{i}", rack, gpus=gpus, cpu=gpus * 8))
        pods += [pod(f"u{i}-{j}", f"n{i}", gpus=4, cpu=0) for j in range(used)]
    for p in pods:
        p["spec"].pop("schedulingGroup")
    s = state(nodes, pods)
    a = Ask({GPU: 8}, needed, RACK, Pod.model_validate(pod("p")))
    found = purchases(s, GANG, a)

    def room(rack: str, extra: list[int]) -> int:
        used = {n["metadata"]["name"]: 0 for n in nodes}
        for p in pods:
            used[p["spec"]["nodeName"]] += 4
        have = sum(
            fits({GPU: g - used[f"n{i}"]}, {GPU: 8})
            for i, (r, g, _) in enumerate(layout)
            if r == rack
        )
        return have + sum(fits({GPU: g}, {GPU: 8}) for g in extra)

    shapes = sorted({g for _, g, _ in layout if g >= 8})
    if not shapes:
        assert found == []
        return
    best: Purchase = found[0]
    assert room(best.domain, [best.bought[GPU] // best.count] * best.count) >= needed
    for rack, shape in itertools.product("ab", shapes):
        for count in range(1, best.count):
            assert room(rack, [shape] * count) < needed, (rack, shape, count, best)


def test_capacity_lists_the_closest_rack_and_nodes_first_and_no_pseudo_domain() -> None:
    cap = capacity(issue_cluster(), ask(8))
    assert [d["domain"] for d in cap["domains"]] == [f"{RACK}=r2", f"{RACK}=r1", f"{RACK}=r0"]
    assert cap["unlabelled"] == 20
    names = [r["node"] for r in cap["nodes"]]
    assert names[:6] == ["gpu-8", "gpu-9", "gpu-10", "gpu-11", "gpu-6", "gpu-7"]
    assert names[12:] == [f"cpu-{i}" for i in range(20)]
    assert cap["nodes"][12]["lacks"] == [GPU]
    every = capacity(issue_cluster(), ask(8), unlabelled=True)
    assert every["domains"][-1]["domain"] == f"{RACK}=(no label)"
