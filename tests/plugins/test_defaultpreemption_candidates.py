"""DefaultPreemption: which candidate node wins (upstream pickOneNodeForPreemption),
how many candidates a dry run looks for, and its args."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError
from troupe.plugins.defaultpreemption import DefaultPreemptionArgs
from troupe.plugins.defaultpreemption.candidates import Candidate, pick_one_node

from tests.plugins.preemption_helpers import candidate, victim

EARLY, LATE = "2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z"


@pytest.mark.parametrize(
    ("candidates", "winner"),
    [
        pytest.param(
            [candidate("a", victim("x", 1), violations=1), candidate("b", victim("y", 900))],
            "b",
            id="fewer budget violations beat lower victim priority",
        ),
        pytest.param(
            [candidate("a", victim("x", 50)), candidate("b", victim("y", 10), victim("z", 10))],
            "b",
            id="the lowest highest-victim priority wins before the victim count",
        ),
        pytest.param(
            [
                candidate("a", victim("x", 10), victim("y", 5)),
                candidate("b", victim("z", 10), victim("w", 1)),
            ],
            "b",
            id="then the smallest sum of victim priorities",
        ),
        pytest.param(
            [
                candidate("a", victim("x", -5), victim("y", -5)),
                candidate("b", victim("z", -5)),
            ],
            "b",
            id="negative priorities still favour fewer victims",
        ),
        pytest.param(
            [
                candidate("a", victim("x", 10, EARLY)),
                candidate("b", victim("y", 10, LATE)),
            ],
            "b",
            id="then the latest start of the most important victims",
        ),
        pytest.param(
            [candidate("a", victim("x", 10)), candidate("b", victim("y", 10))],
            "a",
            id="a full tie keeps the first candidate found",
        ),
        pytest.param([candidate("only", victim("x", 3))], "only", id="a single candidate wins"),
    ],
)
def test_pick_one_node(candidates: list[Candidate], winner: str) -> None:
    assert pick_one_node(candidates).node == winner


def test_picking_from_no_candidates_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="at least one candidate"):
        pick_one_node([])


@pytest.mark.parametrize(
    ("args", "nodes", "want"),
    [
        pytest.param({}, 50, 50, id="small clusters: every potential node"),
        pytest.param({}, 5000, 500, id="large clusters: ten percent"),
        pytest.param({}, 800, 100, id="at least the absolute minimum"),
        pytest.param(
            {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 3},
            500,
            3,
            id="absolute",
        ),
    ],
)
def test_number_of_candidates(args: dict[str, int], nodes: int, want: int) -> None:
    assert DefaultPreemptionArgs.model_validate(args).num_candidates(nodes) == want


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            {"minCandidateNodesPercentage": 101},
            "minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]",
            id="percentage above 100",
        ),
        pytest.param(
            {"minCandidateNodesAbsolute": -1},
            "minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)",
            id="negative absolute",
        ),
        pytest.param(
            {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
            "cannot be zero at the same time as minCandidateNodesAbsolute",
            id="both zero",
        ),
        pytest.param({"minCandidates": 3}, "Extra inputs are not permitted", id="unknown field"),
    ],
)
def test_bad_args_are_refused_with_the_field(args: dict[str, int], message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        DefaultPreemptionArgs.model_validate(args)
