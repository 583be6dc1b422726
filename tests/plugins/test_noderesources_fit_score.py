"""NodeResourcesFit Score: LeastAllocated, MostAllocated and RequestedToCapacityRatio."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.objects import Node, Pod

from tests.plugins.builders import make_node, make_pod, table_of
from tests.plugins.fakes import run_score
from tests.plugins.fit_helpers import (
    GPU,
    fit,
    node,
    running,
)

# --- score ---------------------------------------------------------------------------

SMALL = make_node().name("small").capacity(cpu="4", memory="10000", pods=110).obj()
LARGE = make_node().name("large").capacity(cpu="6", memory="10000", pods=110).obj()
HUGE_MEMORY = make_node().name("huge").capacity(cpu="4", memory="1000Gi", pods=110).obj()
POD_3CPU = make_pod().req(cpu="3", memory="5000").obj()
LEAST_TO_MOST = {"shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}
MOST_LIKE = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}

SCORE_CASES = [
    pytest.param(
        {"type": "LeastAllocated"},
        POD_3CPU,
        [SMALL, LARGE],
        # small: cpu (4000-3000)*100/4000 = 25, memory 50 -> 75/2 = 37; large: 50, 50.
        {"small": 37, "large": 50},
        id="LeastAllocated prefers the emptier node",
    ),
    pytest.param(
        {"type": "MostAllocated"},
        POD_3CPU,
        [SMALL, LARGE],
        # small: cpu 3000*100/4000 = 75, memory 50 -> 62; large: 50, 50.
        {"small": 62, "large": 50},
        id="MostAllocated prefers the fuller node",
    ),
    pytest.param(
        {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": LEAST_TO_MOST},
        POD_3CPU,
        [SMALL, LARGE],
        # small: cpu at 75% -> 25, memory at 50% -> 50; (25 + 50) / 2 = 37.5 rounds to 38.
        {"small": 38, "large": 50},
        id="RequestedToCapacityRatio follows the shape and rounds half up",
    ),
    pytest.param(
        {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": MOST_LIKE},
        POD_3CPU,
        [SMALL, HUGE_MEMORY],
        # huge: memory at 0% scores 0 and is left out, so only cpu's 75 counts.
        {"small": 63, "huge": 75},
        id="a resource scoring zero does not dilute RequestedToCapacityRatio",
    ),
    pytest.param(
        {"type": "LeastAllocated"},
        make_pod().req().obj(),
        [node("n1", cpu="4", memory="8Gi")],
        # 100m and 200Mi count for a pod without requests: 97.5 and 97.56 -> 97.
        {"n1": 97},
        id="a pod without requests is scored with the non-zero defaults",
    ),
    pytest.param(
        {
            "type": "LeastAllocated",
            "resources": [{"name": "cpu", "weight": 1}, {"name": GPU, "weight": 3}],
        },
        make_pod().resources({"cpu": 2, GPU: 1}).obj(),
        [make_node().name("n1").capacity(cpu="4", pods=10).resource(GPU, 4).obj()],
        # cpu 50 * 1 + gpu (4-1)*100/4 = 75 * 3 -> 275 / 4 = 68.
        {"n1": 68},
        id="resource weights weigh the per-resource scores",
    ),
    pytest.param(
        {
            "type": "LeastAllocated",
            "resources": [{"name": "cpu", "weight": 1}, {"name": GPU, "weight": 3}],
        },
        make_pod().resources({"cpu": 2}).obj(),
        [make_node().name("n1").capacity(cpu="4", pods=10).resource(GPU, 4).obj()],
        {"n1": 50},
        id="an extended resource the pod does not request is not scored",
    ),
    pytest.param(
        {"type": "MostAllocated"},
        make_pod().req(cpu="1").obj(),
        [make_node().name("n1").capacity(cpu="2", pods=10).obj()],
        # memory is not offered (allocatable 0) and is left out: cpu 50 only.
        {"n1": 50},
        id="a resource the node does not offer is left out of its score",
    ),
    pytest.param(
        {"type": "LeastAllocated"},
        make_pod().req(cpu="8", memory="5000").obj(),
        [SMALL],
        # cpu over capacity scores 0; memory 50 -> 25.
        {"small": 25},
        id="an over-committed resource scores zero under LeastAllocated",
    ),
]


@pytest.mark.parametrize(("strategy", "pod", "nodes", "expected"), SCORE_CASES)
def test_score(
    strategy: dict[str, object], pod: Pod, nodes: list[Node], expected: dict[str, int]
) -> None:
    plugin = fit({"scoringStrategy": strategy})
    assert run_score(plugin, pod, table_of(nodes)) == expected


def test_score_counts_pods_already_on_the_node_with_non_zero_requests() -> None:
    table = table_of([SMALL, LARGE], pods_on={"large": [running("a"), running("b", cpu="2")]})
    # large: cpu requested 100m (no request) + 2000m + 3000m = 5100 of 6000 -> 15;
    # memory 200Mi is far above 10000 bytes -> 0. (15 + 0) / 2 = 7.
    assert run_score(fit(), POD_3CPU, table) == {"small": 37, "large": 7}


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]),
    st.lists(st.tuples(st.integers(0, 16), st.integers(0, 64)), min_size=1, max_size=6),
    st.integers(0, 20),
    st.integers(0, 80),
)
def test_scores_stay_between_0_and_100(
    kind: str, shapes: list[tuple[int, int]], cpu: int, memory: int
) -> None:
    strategy: dict[str, object] = {"type": kind}
    if kind == "RequestedToCapacityRatio":
        strategy["requestedToCapacityRatio"] = {
            "shape": [
                {"utilization": 0, "score": 3},
                {"utilization": 40, "score": 10},
                {"utilization": 100, "score": 1},
            ]
        }
    nodes = [
        make_node().name(f"n{i}").capacity(cpu=str(c), memory=f"{m}Gi", pods=10).obj()
        for i, (c, m) in enumerate(shapes)
    ]
    pod = make_pod().req(cpu=str(cpu), memory=f"{memory}Gi").obj()
    scores = run_score(fit({"scoringStrategy": strategy}), pod, table_of(nodes))
    assert scores is not None
    assert all(0 <= s <= 100 for s in scores.values())


def test_a_decreasing_shape_truncates_towards_zero_like_go() -> None:
    shape = {"shape": [{"utilization": 0, "score": 10}, {"utilization": 30, "score": 0}]}
    plugin = fit(
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": shape,
                "resources": [{"name": "cpu"}],
            }
        }
    )
    table = table_of([make_node().name("n1").capacity(cpu="100", pods=10).obj()])
    # 10% -> 100 + (0 - 100) * 10 / 30 = 100 - 33.3: Go truncates -33.3 to -33 -> 67.
    assert run_score(plugin, make_pod().req(cpu="10").obj(), table) == {"n1": 67}
