"""Single-node scores (``score_slot``) equal the column scores of the same node."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.cycle import CycleState
from troupe.api.podinfo import PodInfo
from troupe.plugins.noderesources import (
    BalancedAllocation,
    Fit,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
)

from tests.plugins.builders import make_node, make_pod, table_of
from tests.plugins.fakes import FakeHandle

GPU = "nvidia.com/gpu"

node_shape = st.tuples(
    st.sampled_from(["0", "500m", "2", "4", "96"]),  # cpu
    st.sampled_from(["0", "1Gi", "8Gi", "1000"]),  # memory
    st.sampled_from([0, 1, 8]),  # gpus offered
    st.integers(min_value=0, max_value=6),  # pods already there
)
strategy = st.sampled_from(
    [
        {"type": "LeastAllocated"},
        {"type": "MostAllocated"},
        {
            "type": "LeastAllocated",
            "resources": [
                {"name": "cpu", "weight": 3},
                {"name": "memory", "weight": 1},
                {"name": GPU, "weight": 2},
            ],
        },
        {
            "type": "MostAllocated",
            "resources": [{"name": "cpu", "weight": 1}, {"name": GPU, "weight": 5}],
        },
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    shapes=st.lists(node_shape, min_size=1, max_size=6),
    cpu=st.sampled_from(["", "100m", "3"]),
    memory=st.sampled_from(["", "200Mi", "16Gi"]),
    gpus=st.sampled_from([0, 1, 4]),
    scoring=strategy,
    balanced_gpu=st.booleans(),
)
def test_score_slot_equals_the_column_score(
    shapes: list[tuple[str, str, int, int]],
    cpu: str,
    memory: str,
    gpus: int,
    scoring: dict[str, object],
    balanced_gpu: bool,
) -> None:
    nodes, pods_on = [], {}
    for i, (ncpu, nmem, ngpu, existing) in enumerate(shapes):
        b = make_node().name(f"n{i}").capacity(cpu=ncpu, memory=nmem, pods=110)
        if ngpu:
            b = b.resource(GPU, ngpu)
        nodes.append(b.obj())
        pods_on[f"n{i}"] = [
            make_pod().name(f"e{i}-{j}").req(cpu="250m", memory="300Mi").obj()
            for j in range(existing)
        ]
    table = table_of(nodes, pods_on)
    requests: dict[str, str | int] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    if gpus:
        requests[GPU] = gpus
    pod = PodInfo.of(make_pod().name("p").resources(requests).obj())
    balanced_args = {
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    } | (
        {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]} if balanced_gpu else {}
    )
    plugins = [
        Fit(NodeResourcesFitArgs.model_validate({"scoringStrategy": scoring}), FakeHandle()),
        BalancedAllocation(
            NodeResourcesBalancedAllocationArgs.model_validate(balanced_args), FakeHandle()
        ),
    ]
    slots = table.slots()
    for plugin in plugins:
        state = CycleState()
        if not plugin.pre_score(state, pod, table, slots).is_success:
            continue
        columns = plugin.score(state, pod, table, slots)
        for index, slot in enumerate(slots):
            one = plugin.score_slot(state, pod, table, int(slot))
            if one is not None:
                assert one == int(columns[index]), (plugin.name, table.names[int(slot)])
            single = plugin.score(state, pod, table, np.array([slot], dtype=np.intp))
            assert int(single[0]) == int(columns[index])


def test_a_strategy_without_a_single_node_form_says_so() -> None:
    args = NodeResourcesFitArgs.model_validate(
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}]},
            }
        }
    )
    plugin = Fit(args, FakeHandle())
    table = table_of([make_node().name("n").capacity(cpu="4", memory="8Gi", pods=110).obj()])
    pod = PodInfo.of(make_pod().name("p").req(cpu="1").obj())
    state = CycleState()
    assert plugin.pre_score(state, pod, table, table.slots()).is_success
    assert plugin.score_slot(state, pod, table, int(table.slots()[0])) is None


def test_a_resource_offered_after_the_first_score_is_read_on_the_same_table() -> None:
    """The single-node form keeps its plan of rows between pods; a row added to the
    table (the first node offering a GPU) must not leave the GPU out of it."""
    args = NodeResourcesFitArgs.model_validate(
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "cpu", "weight": 1}, {"name": GPU, "weight": 5}],
            }
        }
    )
    plugin = Fit(args, FakeHandle())
    table = table_of([make_node().name("cpu").capacity(cpu="4", memory="8Gi", pods=110).obj()])
    pod = PodInfo.of(make_pod().name("p").resources({"cpu": "1", GPU: 1}).obj())
    state = CycleState()
    assert plugin.pre_score(state, pod, table, table.slots()).is_success
    first = plugin.score_slot(state, pod, table, int(table.slots()[0]))
    assert first == int(plugin.score(state, pod, table, table.slots())[0])
    table.add_node(
        make_node().name("gpu").capacity(cpu="4", memory="8Gi", pods=110).resource(GPU, 2).obj()
    )
    slot = table.index["gpu"]
    columns = plugin.score(state, pod, table, np.array([slot], dtype=np.intp))
    assert plugin.score_slot(state, pod, table, slot) == int(columns[0])
