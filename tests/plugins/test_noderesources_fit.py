"""NodeResourcesFit: filter reasons, the three scoring strategies, hints and args."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from troupe.api.cycle import CycleState
from troupe.api.events import QueueingHint
from troupe.api.objects import Node, Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code
from troupe.plugins.noderesources import Fit, NodeResourcesFitArgs

from tests.plugins.builders import make_node, make_pod, table_of
from tests.plugins.fakes import FakeHandle, run_filter, run_score

GPU = "nvidia.com/gpu"


def fit(args: dict[str, object] | None = None) -> Fit:
    model = NodeResourcesFitArgs.model_validate(args) if args is not None else None
    return Fit(model, FakeHandle())


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: int = 110) -> Node:
    return make_node().name(name).capacity(cpu=cpu, memory=memory, pods=pods).obj()


def running(name: str, cpu: str | None = None, memory: str | None = None) -> Pod:
    return make_pod().name(name).req(cpu=cpu, memory=memory).obj()


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


# --- queueing hints ----------------------------------------------------------------

WANTS_2CPU = make_pod().name("w").uid("w").req(cpu="2").obj()

NODE_HINTS = [
    pytest.param(
        None, node("n", cpu="1"), QueueingHint.SKIP, id="an added node too small is skipped"
    ),
    pytest.param(None, node("n", cpu="2"), QueueingHint.QUEUE, id="an added node that fits queues"),
    pytest.param(
        node("n", cpu="1"), node("n", cpu="4"), QueueingHint.QUEUE, id="growing the cpu queues"
    ),
    pytest.param(
        node("n", cpu="4", memory="1Gi"),
        node("n", cpu="4", memory="2Gi"),
        QueueingHint.SKIP,
        id="growing only memory the pod does not need is skipped",
    ),
    pytest.param(
        node("n", pods=1), node("n", pods=2), QueueingHint.QUEUE, id="allowing more pods queues"
    ),
    pytest.param(
        node("n", pods=1),
        node("n", pods=0),
        QueueingHint.SKIP,
        id="a node allowing no pods is skipped",
    ),
]


@pytest.mark.parametrize(("old", "new", "hint"), NODE_HINTS)
def test_node_hint(old: Node | None, new: Node, hint: QueueingHint) -> None:
    assert fit().node_now_fits(WANTS_2CPU, old, new) is hint


ASSIGNED = make_pod().name("a").uid("a").node("n").req(cpu="2", memory="1Gi")
POD_HINTS = [
    pytest.param(ASSIGNED.obj(), None, QueueingHint.QUEUE, id="deleting an assigned pod queues"),
    pytest.param(
        make_pod().name("u").req(cpu="2").obj(),
        None,
        QueueingHint.SKIP,
        id="deleting an unassigned pod is skipped",
    ),
    pytest.param(
        ASSIGNED.obj(),
        make_pod().name("a").uid("a").node("n").req(cpu="1", memory="1Gi").obj(),
        QueueingHint.QUEUE,
        id="an assigned pod giving back cpu queues",
    ),
    pytest.param(
        ASSIGNED.obj(),
        make_pod().name("a").uid("a").node("n").req(cpu="2", memory="512Mi").obj(),
        QueueingHint.SKIP,
        id="an assigned pod giving back only memory is skipped",
    ),
    pytest.param(
        make_pod().name("w").uid("w").req(cpu="4").obj(),
        WANTS_2CPU,
        QueueingHint.QUEUE,
        id="the pod itself scaling down queues",
    ),
    pytest.param(
        make_pod().name("u").uid("u").req(cpu="4").obj(),
        make_pod().name("u").uid("u").req(cpu="1").obj(),
        QueueingHint.SKIP,
        id="another unassigned pod scaling down is skipped",
    ),
]


@pytest.mark.parametrize(("old", "new", "hint"), POD_HINTS)
def test_pod_hint(old: Pod, new: Pod | None, hint: QueueingHint) -> None:
    assert fit().pod_freed_resources(WANTS_2CPU, old, new) is hint


def test_events_cover_pod_deletion_scale_down_and_node_growth() -> None:
    labels = {str(e.event) for e in fit().events_to_register()}
    assert labels == {
        "AssignedPodDeleteOrScaleDown",
        "PodUPDATE_POD_SCALE_DOWN",
        "NodeAddOrAllocatableUpdate",
    }
    assert all(e.hint is not None for e in fit().events_to_register())


# --- args ------------------------------------------------------------------------------


def test_default_args_score_least_allocated_over_cpu_and_memory() -> None:
    args = NodeResourcesFitArgs.model_validate({})
    assert args.scoring_strategy.type == "LeastAllocated"
    assert [(r.name, r.weight) for r in args.scoring_strategy.resources] == [
        ("cpu", 1),
        ("memory", 1),
    ]


def test_omitted_weights_and_resources_take_upstream_defaults() -> None:
    args = NodeResourcesFitArgs.model_validate(
        {"scoringStrategy": {"type": "MostAllocated", "resources": []}}
    )
    assert [r.name for r in args.scoring_strategy.resources] == ["cpu", "memory"]
    args = NodeResourcesFitArgs.model_validate(
        {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": GPU, "weight": 0}]}}
    )
    assert args.scoring_strategy.resources[0].weight == 1


BAD_ARGS = [
    pytest.param({"scoringStrategy": {"type": "Spread"}}, "LeastAllocated", id="unknown strategy"),
    pytest.param(
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "cpu", "weight": 101}],
            }
        },
        r"resource weight of cpu not in valid range \(0, 100\]",
        id="weight above 100",
    ),
    pytest.param(
        {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
        "requestedToCapacityRatio: Required value",
        id="RequestedToCapacityRatio without a shape",
    ),
    pytest.param(
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": []},
            }
        },
        "at least one point must be specified",
        id="an empty shape",
    ),
    pytest.param(
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]
                },
            }
        },
        r"shape\[1\].utilization: .*sorted in increasing order",
        id="a shape not sorted by utilization",
    ),
    pytest.param(
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 101, "score": 11}]},
            }
        },
        r"utilization: Invalid value: 101: not in valid range \[0, 100\].*score: Invalid value: "
        r"11: not in valid range \[0, 10\]",
        id="shape points out of range",
    ),
    pytest.param(
        {"ignoredResourceGroups": ["example.com/gpu"]},
        "resource group name can't contain '/'",
        id="an ignored group with a slash",
    ),
    pytest.param(
        {"ignoredResources": ["a/b/c"]}, r"ignoredResources\[0\]: Invalid value", id="a bad name"
    ),
    pytest.param({"ignoredResource": ["x"]}, "Extra inputs are not permitted", id="a typo"),
]


@pytest.mark.parametrize(("raw", "message"), BAD_ARGS)
def test_bad_args_are_rejected_with_the_field(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        NodeResourcesFitArgs.model_validate(raw)


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
