"""NodeResourcesBalancedAllocation: the std-dev score, what counts as requested, args."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from troupe.api.objects import Node, Pod
from troupe.plugins.noderesources import BalancedAllocation, NodeResourcesBalancedAllocationArgs

from tests.plugins.builders import make_node, make_pod, table_of
from tests.plugins.fakes import FakeHandle, run_score

GPU = "nvidia.com/gpu"
CPU_MEM_GPU = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]}


def balanced(args: dict[str, object] | None = None) -> BalancedAllocation:
    model = NodeResourcesBalancedAllocationArgs.model_validate(args) if args else None
    return BalancedAllocation(model, FakeHandle())


def node(name: str, cpu: str = "4", memory: str = "10000", gpu: int | None = None) -> Node:
    b = make_node().name(name).capacity(cpu=cpu, memory=memory, pods=110)
    return (b.resource(GPU, gpu) if gpu is not None else b).obj()


CASES = [
    pytest.param(
        None,
        make_pod().req(cpu="3", memory="5000").obj(),
        [node("uneven"), node("even", cpu="6")],
        {},
        # uneven: cpu 0.75, memory 0.5 -> std 0.125 -> 87; even: 0.5, 0.5 -> 100.
        {"uneven": 87, "even": 100},
        id="the node left with balanced cpu and memory use scores higher",
    ),
    pytest.param(
        None,
        make_pod().req(cpu="1", memory="2500").obj(),
        [node("n1")],
        {"n1": [make_pod().name("besteffort").req().obj()]},
        # Plain requests: the best-effort pod adds nothing; 0.25 and 0.25 -> 100.
        {"n1": 100},
        id="pods already on the node count with their plain requests",
    ),
    pytest.param(
        CPU_MEM_GPU,
        make_pod().resources({"cpu": 1, "memory": 5000, GPU: 3}).obj(),
        [node("n1", gpu=4)],
        {},
        # 0.25, 0.5, 0.75: std sqrt(0.125 / 3) = 0.2041 -> 79.
        {"n1": 79},
        id="three resources use the standard deviation",
    ),
    pytest.param(
        CPU_MEM_GPU,
        make_pod().req(cpu="1", memory="5000").obj(),
        [node("n1", gpu=4)],
        {},
        # the pod asks for no gpu, so only 0.25 and 0.5 count -> 87.
        {"n1": 87},
        id="an extended resource the pod does not request is left out",
    ),
    pytest.param(
        None,
        make_pod().req(cpu="1", memory="5000").obj(),
        [node("n1", cpu="2")],
        {"n1": [make_pod().name("big").req(cpu="3").obj()]},
        # cpu 4000/2000 is capped at 1; memory 0.5 -> std 0.25 -> 75.
        {"n1": 75},
        id="a fraction above one counts as one",
    ),
    pytest.param(
        None,
        make_pod().req(cpu="1", memory="5000").obj(),
        [make_node().name("n1").capacity(cpu="4", pods=10).obj()],
        {},
        # memory is not offered: one fraction, std 0.
        {"n1": 100},
        id="a resource the node does not offer is left out",
    ),
]


@pytest.mark.parametrize(("args", "pod", "nodes", "pods_on", "expected"), CASES)
def test_score(
    args: dict[str, object] | None,
    pod: Pod,
    nodes: list[Node],
    pods_on: dict[str, list[Pod]],
    expected: dict[str, int],
) -> None:
    assert run_score(balanced(args), pod, table_of(nodes, pods_on)) == expected


def test_a_best_effort_pod_is_not_scored() -> None:
    # kubernetes#129138: PreScore returns SKIP for a pod requesting nothing.
    assert run_score(balanced(), make_pod().req().obj(), table_of([node("n1")])) is None


def upstream_score(fractions: list[float]) -> int:
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    else:
        std = 0.0
    return int((1 - std) * 100)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=6
    ),
    st.integers(1, 9),
    st.integers(0, 9),
    st.integers(0, 9),
)
def test_matches_upstream_arithmetic_node_by_node(
    shapes: list[tuple[int, int, int]], cpu: int, memory: int, gpu: int
) -> None:
    nodes = [
        node(f"n{i}", cpu=str(c), memory=str(m * 1000), gpu=g) for i, (c, m, g) in enumerate(shapes)
    ]
    pod = make_pod().resources({"cpu": cpu, "memory": memory * 1000, GPU: gpu}).obj()
    scores = run_score(balanced(CPU_MEM_GPU), pod, table_of(nodes))
    assert scores is not None
    for i, (c, m, g) in enumerate(shapes):
        pairs = [(cpu, c), (memory, m)] + ([(gpu, g)] if gpu else [])
        fractions = [min(want / have, 1.0) for want, have in pairs if have]
        assert scores[f"n{i}"] == upstream_score(fractions)
        assert 0 <= scores[f"n{i}"] <= 100


def test_default_args_balance_cpu_and_memory() -> None:
    args = NodeResourcesBalancedAllocationArgs.model_validate({})
    assert [(r.name, r.weight) for r in args.resources] == [("cpu", 1), ("memory", 1)]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(
            {"resources": [{"name": "cpu"}, {"name": "cpu"}]},
            r"resources\[1\].name: Duplicate value: 'cpu'",
            id="a resource listed twice",
        ),
        pytest.param(
            {"resources": [{"name": "cpu", "weight": 2}]},
            r"resources\[0\].weight: Invalid value: 2: must be 1",
            id="a weight other than 1",
        ),
    ],
)
def test_bad_args_are_rejected(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        NodeResourcesBalancedAllocationArgs.model_validate(raw)
