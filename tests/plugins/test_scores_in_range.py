"""Resource scores stay in [0, 100] whatever reaches them: a negative request (from a
pod that slipped past validation), negative accounted usage or a negative allocatable
cannot push a node's score out of range and fail every later Score."""

from __future__ import annotations

import dataclasses

import pytest
from troupe.api.cycle import CycleState
from troupe.api.framework import MAX_NODE_SCORE, MIN_NODE_SCORE
from troupe.api.nodetable import NodeTable
from troupe.api.podinfo import PodInfo

from tests.plugins.builders import make_pod, table_of
from tests.plugins.fakes import run_score
from tests.plugins.fit_helpers import fit, node
from tests.plugins.test_balanced_allocation import balanced

STRATEGIES = [
    {"type": "LeastAllocated"},
    {"type": "MostAllocated"},
    {
        "type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {
            "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
        },
    },
]


def poisoned() -> tuple[PodInfo, NodeTable]:
    info = PodInfo.of(make_pod().name("p").req(cpu="1", memory="1Gi").obj())
    info = dataclasses.replace(
        info,
        requests={"cpu": -64_000, "memory": -(2**40)},
        nonzero_cpu=-64_000,
        nonzero_memory=-(2**40),
    )
    table = table_of([node("a"), node("b"), node("c")])
    # Usage and allocatable no parsed quantity can give, on two of the nodes.
    table.requested[:, table.index["a"]] = -(10**12)
    table.nonzero_requested[:, table.index["a"]] = -(10**12)
    table.allocatable[:, table.index["b"]] = -1
    return info, table


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: str(s["type"]))
def test_fit_scores_stay_in_range(strategy: dict[str, object]) -> None:
    info, table = poisoned()
    plugin = fit({"scoringStrategy": strategy})
    scores = run_score(plugin, info, table)
    assert scores is not None
    assert all(MIN_NODE_SCORE <= v <= MAX_NODE_SCORE for v in scores.values()), scores
    state = CycleState()
    slots = table.slots()
    plugin.pre_score(state, info, table, slots)
    for slot in slots:
        one = plugin.score_slot(state, info, table, int(slot))
        assert one is None or MIN_NODE_SCORE <= one <= MAX_NODE_SCORE


def test_balanced_allocation_scores_stay_in_range() -> None:
    info, table = poisoned()
    info = dataclasses.replace(info, requests={"cpu": -64_000, "memory": 2**30})
    plugin = balanced()
    scores = run_score(plugin, info, table)
    assert scores is not None
    assert all(MIN_NODE_SCORE <= v <= MAX_NODE_SCORE for v in scores.values()), scores
    state = CycleState()
    slots = table.slots()
    plugin.pre_score(state, info, table, slots)
    for slot in slots:
        one = plugin.score_slot(state, info, table, int(slot))
        assert one is None or MIN_NODE_SCORE <= one <= MAX_NODE_SCORE
