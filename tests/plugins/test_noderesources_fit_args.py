"""NodeResourcesFit queueing hints, registered events and args."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from troupe.api.events import QueueingHint
from troupe.api.objects import Node, Pod
from troupe.plugins.noderesources import NodeResourcesFitArgs

from tests.plugins.builders import make_pod
from tests.plugins.fit_helpers import (
    GPU,
    fit,
    node,
)

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
