"""PodTopologySpread Score (ScheduleAnyway constraints), default constraints and args."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from pydantic import ValidationError
from troupe.api.cycle import CycleState
from troupe.api.nodetable import NodeTable
from troupe.api.objects import (
    Node,
    OwnerReference,
    Pod,
)
from troupe.api.podinfo import PodInfo
from troupe.plugins.podtopologyspread import (
    PodTopologySpread,
    PodTopologySpreadArgs,
)

from tests.plugins import fakes
from tests.plugins.builders import PodBuilder, table_of
from tests.plugins.spread_helpers import (
    HOST,
    WEB,
    node,
    plugin,
    run_filter,
    spread,
    web,
    webs,
)

# --- score -----------------------------------------------------------------------


def run_score(
    pl: PodTopologySpread, pod: Pod, table: NodeTable, scored: Sequence[str]
) -> list[int] | None:
    got = fakes.run_score(pl, pod, table, only=scored)
    return None if got is None else [got[n] for n in scored]


def soft(pod: PodBuilder, max_skew: int, key: str, **kw: object) -> PodBuilder:
    return pod.spread_constraint(max_skew, key, WEB, when="ScheduleAnyway", **kw)  # type: ignore[arg-type]


SCORE_CASES = [
    # zone weight ln(2+2)=1.386: zone a raw 2*1.386=2.77->3, zone b 0; c1 ignored.
    pytest.param(
        [node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1")],
        {"a1": webs("w", 1), "a2": webs("v", 1)},
        soft(web("p"), 1, "zone").obj(),
        ["a1", "a2", "b1", "c1"],
        [0, 0, 100, 0],
        id="the emptier zone scores 100 and a node without the key scores 0",
    ),
    # hostname weight ln(3+2)=1.609: raw 3*1.609+1=5.83->6, 1.609+1=2.61->3, 0+1=1.
    pytest.param(
        [node("n0"), node("n1"), node("n2")],
        {"n0": webs("w", 3), "n1": webs("v", 1)},
        soft(web("p"), 2, HOST).obj(),
        ["n0", "n1", "n2"],
        [16, 66, 100],
        id="hostname spreading with maxSkew 2 adds maxSkew-1 to every node",
    ),
    # zone ln4 (a=2, b=1) + hostname ln5: 2.77+3.22=5.99->6, 2.77->3, 1.39+1.61=3.0->3.
    pytest.param(
        [node("n0", "a"), node("n1", "a"), node("n2", "b")],
        {"n0": webs("w", 2), "n2": webs("v", 1)},
        soft(soft(web("p"), 1, "zone"), 1, HOST).obj(),
        ["n0", "n1", "n2"],
        [50, 100, 100],
        id="zone and hostname constraints add up",
    ),
    # Honor: n1 (outside the nodeSelector) does not count: a=0, b=1 -> raw 0, 1.
    pytest.param(
        [node("n0", "a", pool="x"), node("n1", "a"), node("n2", "b", pool="x")],
        {"n1": webs("w", 3), "n2": webs("v", 1)},
        soft(web("p").node_selector(pool="x"), 1, "zone").obj(),
        ["n0", "n2"],
        [100, 0],
        id="nodeAffinityPolicy Honor leaves pods on non-matching nodes out of the counts",
    ),
    # Ignore: a=3 -> 3*1.386=4.16->4, b=1 -> 1: 100*(5-4)//4=25, 100*(5-1)//4=100.
    pytest.param(
        [node("n0", "a", pool="x"), node("n1", "a"), node("n2", "b", pool="x")],
        {"n1": webs("w", 3), "n2": webs("v", 1)},
        soft(web("p").node_selector(pool="x"), 1, "zone", node_affinity_policy="Ignore").obj(),
        ["n0", "n2"],
        [25, 100],
        id="nodeAffinityPolicy Ignore counts pods on every node",
    ),
    pytest.param(
        [node("n0", "a"), node("n1", "b")],
        {},
        soft(web("p"), 1, "zone").obj(),
        ["n0", "n1"],
        [100, 100],
        id="no matching pod anywhere scores every node 100",
    ),
]


@pytest.mark.parametrize(("nodes", "pods_on", "pod", "scored", "expected"), SCORE_CASES)
def test_score(
    nodes: list[Node],
    pods_on: Mapping[str, Sequence[Pod]],
    pod: Pod,
    scored: list[str],
    expected: list[int],
) -> None:
    table = table_of(nodes, pods_on=pods_on)
    assert run_score(plugin(), pod, table, scored) == expected


def test_pre_score_skips_a_pod_without_soft_constraints() -> None:
    table = table_of([node("a1", "a")])
    assert run_score(plugin(), spread(web("p")), table, ["a1"]) is None


# --- default constraints and args --------------------------------------------------


def owned_by(pod: Pod, kind: str) -> Pod:
    pod.metadata.owner_references.append(
        OwnerReference(kind=kind, name="rs", uid="rs-uid", controller=True)
    )
    return pod


DEFAULTS = PodTopologySpreadArgs.model_validate(
    {
        "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
        ]
    }
)


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            owned_by(web("p").obj(), "ReplicaSet"),
            {"a1": "skew", "b1": "ok"},
            id="a ReplicaSet pod without constraints spreads by the default constraints",
        ),
        pytest.param(
            web("p").obj(),
            {"a1": "ok", "b1": "ok"},
            id="a bare pod gets no default constraints",
        ),
    ],
)
def test_default_constraints(pod: Pod, expected: dict[str, str]) -> None:
    table = table_of([node("a1", "a"), node("b1", "b")], pods_on={"a1": webs("w", 2)})
    pl = plugin(DEFAULTS)
    info = PodInfo.of(pod)
    _, status = pl.pre_filter(CycleState(), info, table)
    if status.is_skip:
        assert expected == {"a1": "ok", "b1": "ok"}
    else:
        assert run_filter(pl, pod, table) == expected


def test_args_defaults_and_aliases() -> None:
    args = PodTopologySpreadArgs.model_validate({})
    assert (args.default_constraints, args.defaulting_type) == ([], "List")
    assert PodTopologySpreadArgs.model_validate({"defaultingType": "System"}).defaulting_type == (
        "System"
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param({"unknown": 1}, "unknown", id="an unknown field is rejected"),
        pytest.param(
            {
                "defaultingType": "System",
                "defaultConstraints": DEFAULTS.model_dump()["default_constraints"],
            },
            "defaultingType",
            id="System defaulting with default constraints is rejected",
        ),
        pytest.param(
            {
                "defaultConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": WEB},
                    }
                ]
            },
            "must not define a selector",
            id="a default constraint with a selector is rejected",
        ),
        pytest.param(
            {
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                ]
            },
            "Duplicate value",
            id="two default constraints on the same key and action are rejected",
        ),
        pytest.param(
            {
                "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            "maxSkew",
            id="a default constraint with maxSkew 0 is rejected",
        ),
    ],
)
def test_args_errors(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PodTopologySpreadArgs.model_validate(raw)
