"""NodeResourcesFit Filter: insufficient resources, ignored resources, a per-node cross-check."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.cycle import CycleState
from troupe.api.objects import Node, Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code

from tests.plugins.builders import make_node, make_pod, table_of
from tests.plugins.fakes import run_filter
from tests.plugins.fit_helpers import (
    GPU,
    fit,
    node,
    running,
)

# --- filter ------------------------------------------------------------------------

FILTER_CASES = [
    pytest.param(
        make_pod().req(cpu="1", memory="1Gi").obj(),
        [node("n1")],
        {},
        {},
        id="a pod that fits passes",
    ),
    pytest.param(
        make_pod().req(cpu="2", memory="2Gi").obj(),
        [node("n1", cpu="2", memory="2Gi")],
        {"n1": [running("a", cpu="1", memory="1")]},
        {"n1": ["Insufficient cpu", "Insufficient memory"]},
        id="too many resources fails with one reason per resource",
    ),
    pytest.param(
        make_pod().req(cpu="1").obj(),
        [node("n1", cpu="2"), node("n2", cpu="1")],
        {"n2": [running("a", cpu="500m")]},
        {"n2": ["Insufficient cpu"]},
        id="only the node without room for the cpu is rejected",
    ),
    pytest.param(
        make_pod().req(cpu="2").obj(),
        [node("n1", cpu="2")],
        {},
        {},
        id="a request equal to what is free fits",
    ),
    pytest.param(
        make_pod().obj(),
        [node("n1", pods=1)],
        {"n1": [running("a")]},
        {"n1": ["Too many pods"]},
        id="a full node rejects even a pod requesting nothing",
    ),
    pytest.param(
        make_pod().req(cpu="8").obj(),
        [node("n1", pods=1)],
        {"n1": [running("a")]},
        {"n1": ["Too many pods", "Insufficient cpu"]},
        id="too many pods and too little cpu are both reported",
    ),
    pytest.param(
        make_pod().resources({GPU: 1}).obj(),
        [node("n1")],
        {},
        {"n1": [f"Insufficient {GPU}"]},
        id="an extended resource the node does not offer is insufficient",
    ),
    pytest.param(
        make_pod().resources({"ephemeral-storage": "2Gi"}).obj(),
        [
            make_node()
            .name("n1")
            .capacity(cpu="1", pods=10)
            .resource("ephemeral-storage", "1Gi")
            .obj()
        ],
        {},
        {"n1": ["Insufficient ephemeral-storage"]},
        id="ephemeral storage is checked like any resource",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "pods_on", "rejected"), FILTER_CASES)
def test_filter(
    pod: Pod, nodes: list[Node], pods_on: dict[str, list[Pod]], rejected: dict[str, list[str]]
) -> None:
    out = run_filter(fit(), pod, table_of(nodes, pods_on))
    assert out.status.is_success
    assert out.reasons == rejected
    assert out.feasible == {n.metadata.name for n in nodes} - set(rejected)
    assert all(codes == {Code.UNSCHEDULABLE} for codes in out.codes.values())


IGNORE_CASES = [
    pytest.param({"ignoredResources": [GPU]}, GPU, True, id="an ignored extended resource"),
    pytest.param(
        {"ignoredResourceGroups": ["nvidia.com"]}, GPU, True, id="a resource in an ignored group"
    ),
    pytest.param(
        {"ignoredResources": ["example.com/fpga"]}, GPU, False, id="another extended resource"
    ),
    pytest.param(
        {"ignoredResources": ["memory"]}, "memory", False, id="a native resource, never ignored"
    ),
]


@pytest.mark.parametrize(("args", "resource", "ignored"), IGNORE_CASES)
def test_ignored_resources_are_not_checked(
    args: dict[str, object], resource: str, ignored: bool
) -> None:
    table = table_of([node("n1", memory="1Gi")])
    pod = make_pod().resources({resource: "2Gi" if resource == "memory" else 1}).obj()
    out = run_filter(fit(args), pod, table)
    assert (out.feasible == {"n1"}) is ignored


def naive_fits(
    node_alloc: dict[str, int], used: dict[str, int], pods: int, want: dict[str, int]
) -> bool:
    if pods + 1 > node_alloc.get("pods", 0):
        return False
    return all(v <= node_alloc.get(r, 0) - used.get(r, 0) for r, v in want.items() if v > 0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(0, 3), st.integers(0, 3)),
        min_size=1,
        max_size=8,
    ),
    st.integers(0, 4),
    st.integers(0, 4),
)
def test_filter_agrees_with_a_per_node_check(
    shapes: list[tuple[int, int, int, int]], want_cpu: int, want_gpu: int
) -> None:
    nodes, pods_on, expected = [], {}, set()
    for i, (cpu, gpu, pods_cap, used_cpu) in enumerate(shapes):
        name = f"n{i}"
        nodes.append(
            make_node().name(name).capacity(cpu=str(cpu), pods=pods_cap).resource(GPU, gpu).obj()
        )
        placed = [running(f"p{i}", cpu=str(used_cpu))] if pods_cap and used_cpu else []
        pods_on[name] = placed
        alloc = {"cpu": cpu * 1000, GPU: gpu, "pods": pods_cap}
        used = {"cpu": used_cpu * 1000 if placed else 0}
        if naive_fits(alloc, used, len(placed), {"cpu": want_cpu * 1000, GPU: want_gpu}):
            expected.add(name)
    pod = make_pod().resources({"cpu": want_cpu, GPU: want_gpu}).obj()
    table = table_of(nodes, pods_on, capacity=2)
    assert run_filter(fit(), pod, table).feasible == expected
    # The single-node check used by the pod-group cycle gives the same verdicts.
    plugin, info, state = fit(), PodInfo.of(pod), CycleState()
    plugin.pre_filter(state, info, table)
    one_by_one = {
        n for n, slot in table.index.items() if plugin.filter_slot(state, info, table, slot)
    }
    assert one_by_one == expected


def test_prefilter_state_missing_still_filters() -> None:
    table = table_of([node("n1", cpu="1")])
    plugin = fit()
    from troupe.api.cycle import CycleState

    out = plugin.filter(CycleState(), PodInfo.of(make_pod().req(cpu="2").obj()), table)
    assert not out.feasible[table.index["n1"]]
    assert np.count_nonzero(out.feasible & table.present) == 0


def test_two_profiles_ignoring_different_resources_judge_the_same_pod_apart() -> None:
    table = table_of([node("n1")])
    info = PodInfo.of(make_pod().resources({GPU: 1}).obj())
    assert run_filter(fit({"ignoredResources": [GPU]}), info, table).feasible == {"n1"}
    assert run_filter(fit(), info, table).feasible == set()
