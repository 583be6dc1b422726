"""Consecutive pods of one signature placed from one shared evaluation.

The property that matters: a batched placement is always one a full cycle over
every node would have chosen at that moment (its node is among the full cycle's
best-scored feasible nodes), and the batch ends as soon as the cluster changes in
any other way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from troupe.api.cycle import CycleState
from troupe.api.framework import FilterResult, PreFilterResult
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Namespace
from troupe.api.podinfo import PodInfo
from troupe.api.status import SKIP, SUCCESS, Status
from troupe.plugins.registry import PluginSpec, default_registry
from troupe.scheduler.cycle.batch_placer import signature
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.service.wiring import Wired

from tests.plugins.builders import NodeBuilder, PodBuilder, make_node, make_pod
from tests.scheduler.harness import Harness

PROFILE = "troupe-scheduler"


def best_nodes(s: Wired, fwk: Framework, info: PodInfo) -> set[str]:
    """The nodes a full cycle over every node would choose among for ``info`` now."""
    table = s.cache.table
    state = s.algorithm.new_cycle_state()
    _, status = fwk.run_pre_filter(state, info, table)
    assert status.is_success
    outcome = fwk.run_filter(state, info, table, table.present)
    slots = table.slots()[outcome.feasible[table.slots()]]
    if len(slots) == 0:
        return set()
    assert fwk.run_pre_score(state, info, table, slots).is_success
    scores, status = fwk.run_score(state, info, table, slots)
    assert status.is_success
    return {table.names[int(x)] for x in slots[scores == scores.max()]}


class Checked:
    """Wraps the scheduler's batches: every batched choice is checked against a
    full evaluation taken just before it."""

    def __init__(self, h: Harness) -> None:
        self.s = h.parts
        self.batched: list[str] = []
        self.wrong: list[tuple[str, str, set[str]]] = []
        original = self.s.pod_batches.place

        def place(fwk: Framework, info: PodInfo) -> Any:
            best = best_nodes(self.s, fwk, info)
            got = original(fwk, info)
            if got is not None:
                self.batched.append(info.key)
                if got[0].node not in best:
                    self.wrong.append((info.key, got[0].node, best))
            return got

        self.s.pod_batches.place = place  # type: ignore[method-assign]


def pod(name: str, cpu: str = "500m", memory: str = "256Mi") -> PodBuilder:
    return (
        make_pod().name(name).uid(f"uid-{name}").req(cpu=cpu, memory=memory).scheduler_name(PROFILE)
    )


def node(name: str, cpu: str = "4", memory: str = "8Gi") -> NodeBuilder:
    return (
        make_node()
        .name(name)
        .label("kubernetes.io/hostname", name)
        .capacity(cpu=cpu, memory=memory, pods=110)
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=st.lists(
        st.tuples(
            st.sampled_from(["1", "2", "4", "8"]),
            st.sampled_from(["2Gi", "4Gi", "16Gi"]),
            st.booleans(),  # a PreferNoSchedule taint (TaintToleration normalizes)
            st.booleans(),  # label tier=fast (preferred node affinity normalizes)
        ),
        min_size=2,
        max_size=10,
    ),
    cpu=st.sampled_from(["100m", "500m", "1"]),
    memory=st.sampled_from(["128Mi", "1Gi"]),
    count=st.integers(min_value=2, max_value=40),
    prefer_fast=st.booleans(),
    seed=st.integers(min_value=0, max_value=3),
)
async def test_every_batched_choice_is_one_a_full_cycle_would_make(
    shapes: list[tuple[str, str, bool, bool]],
    cpu: str,
    memory: str,
    count: int,
    prefer_fast: bool,
    seed: int,
) -> None:
    h = Harness(seed=seed)
    nodes = []
    for i, (ncpu, nmem, tainted, fast) in enumerate(shapes):
        b = node(f"n{i}", ncpu, nmem)
        if tainted:
            b = b.taint("soft", "x", "PreferNoSchedule")
        if fast:
            b = b.label("tier", "fast")
        nodes.append(b.obj())
    h.nodes(nodes)
    checked = Checked(h)
    pods = []
    for i in range(count):
        b = pod(f"p{i:03d}", cpu, memory)
        if prefer_fast:
            b = b.preferred_node_term(5, ("tier", "In", ["fast"]))
        pods.append(b.obj())
    h.pods(pods)
    await h.settle(rounds=200)
    assert checked.wrong == []
    bound = {key for key, _ in h.client.bindings}
    # Every pod either bound or left pending because nothing fits: never lost.
    pending = h.scheduler.queue.pending_counts()
    assert len(bound) + pending["unschedulable"] + pending["backoff"] == count
    await h.close()


async def test_a_run_of_identical_pods_is_batched_after_its_first_pod() -> None:
    h = Harness().nodes([node(f"n{i}").obj() for i in range(6)])
    checked = Checked(h)
    h.pods([pod(f"p{i:02d}").obj() for i in range(20)])
    await h.settle()
    assert len(h.client.bindings) == 20
    # The first pod runs the full cycle; each following one reuses the evaluation.
    assert len(checked.batched) == 19 and checked.wrong == []
    assert h.parts.pod_batches.batches == 1
    # LeastAllocated still spreads them: 20 pods over 6 equal nodes.
    per_node: dict[str, int] = {}
    for _, n in h.client.bindings:
        per_node[n] = per_node.get(n, 0) + 1
    assert sorted(per_node.values()) == [3, 3, 3, 3, 4, 4]
    await h.close()


async def test_any_other_cluster_change_ends_the_batch() -> None:
    h = Harness().nodes([node(f"n{i}").obj() for i in range(4)])
    h.pods([pod(f"a{i}").obj() for i in range(3)])
    await h.settle()
    assert h.parts.pod_batches.batched == 2
    # A node arrives: the next pod of the same shape runs the full cycle first.
    h.nodes([node("big", cpu="64", memory="256Gi").obj()])
    h.pods([pod("b0").obj()])
    await h.settle()
    assert h.parts.pod_batches.batched == 2
    assert h.client.node_of("default/b0") == "big"
    h.pods([pod(f"b{i}").obj() for i in range(1, 4)])
    await h.settle()
    assert h.parts.pod_batches.batched == 5
    assert {h.client.node_of(f"default/b{i}") for i in range(4)} == {"big"}
    await h.close()


async def test_pods_of_another_shape_in_between_start_over() -> None:
    h = Harness().nodes([node(f"n{i}").obj() for i in range(4)])
    # Names order the queue: x0 (small), x1 (large), x2 (small), ...: no two alike.
    h.pods(pod(f"x{i}", cpu="100m" if i % 2 == 0 else "1").obj() for i in range(8))
    await h.settle()
    assert len(h.client.bindings) == 8
    assert h.parts.pod_batches.batched == 0
    await h.close()


async def test_a_pod_with_anti_affinity_to_its_peers_is_never_batched() -> None:
    h = Harness().nodes([node(f"n{i}").obj() for i in range(4)])
    checked = Checked(h)
    h.pods(
        pod(f"w{i}")
        .label("app", "web")
        .pod_anti_affinity("kubernetes.io/hostname", {"app": "web"})
        .obj()
        for i in range(5)
    )
    await h.settle(rounds=100)
    nodes = [n for _, n in h.client.bindings]
    assert len(nodes) == 4 and len(set(nodes)) == 4, "one per node, the fifth pending"
    assert checked.batched == []
    await h.close()


async def test_a_batch_ends_when_its_candidates_run_out_and_the_rest_wait() -> None:
    h = Harness().nodes([node("n0", cpu="2").obj(), node("n1", cpu="2").obj()])
    checked = Checked(h)
    h.pods(pod(f"p{i}", cpu="1").obj() for i in range(6))
    await h.settle(rounds=100)
    assert sorted(n for _, n in h.client.bindings) == ["n0", "n0", "n1", "n1"]
    assert checked.wrong == []
    assert h.scheduler.queue.pending_counts()["unschedulable"] == 2
    await h.close()


def test_pods_with_other_tolerations_never_share_a_signature() -> None:
    def sig(p: PodBuilder) -> object:
        return signature(PodInfo.of(p.obj()), with_labels=False)

    def base(name: str) -> PodBuilder:
        return make_pod().name(name).req(cpu="1").toleration("gpu", "true", "NoSchedule")

    assert sig(base("a")) == sig(base("b"))  # one shape, two pods
    others = [
        make_pod().name("c").req(cpu="1"),
        make_pod().name("d").req(cpu="1").toleration("gpu", "false", "NoSchedule"),
        make_pod().name("e").req(cpu="1").toleration("gpu", "true", "NoExecute"),
        make_pod().name("f").req(cpu="1").toleration("tpu", "true", "NoSchedule"),
        base("g").toleration("spot", "", "NoSchedule"),
    ]
    assert len({sig(p) for p in others} | {sig(base("a"))}) == len(others) + 1


async def test_pods_of_one_spec_in_another_namespace_are_not_placed_from_the_same_batch() -> None:
    # A placed pod keeps app=web pods of namespace b off its node; pods of one spec
    # from namespace a then b must not share one evaluation.
    h = Harness().nodes([node(n).label("kubernetes.io/hostname", n).obj() for n in ("n1", "n2")])
    guard = (
        make_pod()
        .name("guard")
        .uid("uid-guard")
        .node("n1")
        .pod_anti_affinity("kubernetes.io/hostname", {"app": "web"}, namespaces=["b"])
        .obj()
    )
    h.pods([guard])
    pods = [pod(f"web-{i}").namespace("a").label("app", "web").obj() for i in range(3)]
    pods += [pod(f"web-{i}").namespace("b").label("app", "web").obj() for i in range(3, 6)]
    h.pods(pods)
    await h.settle()
    placed = dict(h.client.bindings)
    assert len(placed) == 6
    assert [placed[f"b/web-{i}"] for i in range(3, 6)] == ["n2"] * 3
    await h.close()


async def test_a_namespace_relabelled_ends_a_batch() -> None:
    h = Harness().nodes([node(f"n{i}").obj() for i in range(4)])
    h.pods([pod(f"p{i}").obj() for i in range(3)])
    await h.settle()
    batches = h.parts.pod_batches
    assert batches._placer is not None
    before = Namespace.model_validate({"metadata": {"name": "default", "labels": {}}})
    after = Namespace.model_validate({"metadata": {"name": "default", "labels": {"t": "x"}}})
    batched = batches.batched
    h.handlers.on_namespace_update(before, after)
    assert batches._placer is None
    h.pods([pod("p3").obj()])
    await h.settle()
    assert batches.batched == batched  # p3 ran the full cycle
    await h.close()


class Ledger:
    """A plugin whose verdict ties nodes together (not node-local): a node is
    feasible only while it holds no more of the pods it counts than the emptiest
    node (a strict round robin), counted at Reserve. Pods labelled ``ledger=off``
    make its PreFilter SKIP, which must cost them nothing."""

    name = "Ledger"

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if pod.pod.metadata.labels.get("ledger") == "off":
            return None, SKIP
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        counts = np.array([self.counts.get(n, 0) if n else 0 for n in table.names])
        low = counts[table.present].min() if table.present.any() else 0
        return FilterResult.masked(counts <= low, "not the ledger's turn")

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.counts[node_name] = self.counts.get(node_name, 0) + 1
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.counts[node_name] -= 1


def ledger_harness(seed: int = 0) -> Harness:
    registry = default_registry()
    registry.register(PluginSpec("Ledger", lambda a, h: Ledger(), None, Ledger))
    on = {"enabled": [{"name": "Ledger"}]}
    points = {"preFilter": on, "filter": on, "reserve": on}
    return Harness({"profiles": [{"plugins": points}]}, registry=registry, seed=seed)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.sampled_from(["2", "4", "8"]), min_size=2, max_size=6),
    count=st.integers(min_value=2, max_value=24),
    ledger=st.booleans(),
    seed=st.integers(min_value=0, max_value=3),
)
async def test_a_plugin_active_for_the_pod_that_is_not_node_local_keeps_batching_exact(
    sizes: list[str], count: int, ledger: bool, seed: int
) -> None:
    """KEP-5598 stays exact: a not node-local plugin whose PreFilter does not SKIP
    turns batching off for the pod; one that SKIPs costs nothing (pods batch)."""
    h = ledger_harness(seed).nodes([node(f"n{i}", cpu).obj() for i, cpu in enumerate(sizes)])
    checked = Checked(h)
    label = "on" if ledger else "off"
    h.pods(pod(f"p{i:03d}").label("ledger", label).obj() for i in range(count))
    await h.settle(rounds=200)
    assert checked.wrong == []
    if ledger:
        assert checked.batched == []
    elif count > 2:
        assert checked.batched, "a plugin that SKIPs must not stop batching"
    await h.close()
