"""PodTopologySpread Filter: DoNotSchedule constraints, maxSkew, minDomains and the
node inclusion policies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from troupe.api.cycle import CycleState
from troupe.api.objects import (
    LabelSelector,
    Node,
    Pod,
)
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code
from troupe.plugins.podtopologyspread.constraints import tolerated_mask

from tests.plugins.builders import make_node, make_pod, table_of
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


def _terminating(name: str) -> Pod:
    return web(name).terminating().obj()


def _other_ns(name: str) -> Pod:
    return web(name).namespace("other").obj()


FILTER_CASES = [
    pytest.param(
        [node("a1", "a"), node("b1", "b")],
        {"a1": webs("w", 2)},
        spread(web("p")),
        {"a1": "skew", "b1": "ok"},
        id="maxSkew 1 with zones a=2 b=0 only allows zone b",
    ),
    pytest.param(
        [node("a1", "a"), node("b1", "b")],
        {"a1": webs("w", 1)},
        spread(web("p"), max_skew=2),
        {"a1": "ok", "b1": "ok"},
        id="maxSkew 2 with zones a=1 b=0 allows both zones",
    ),
    pytest.param(
        [node("a1", "a"), node("b1", "b")],
        {"a1": webs("w", 1), "b1": webs("v", 1)},
        spread(web("p")),
        {"a1": "ok", "b1": "ok"},
        id="balanced zones a=1 b=1 allow both",
    ),
    pytest.param(
        [node("a1", "a"), node("b1", "b")],
        {"a1": webs("w", 1), "b1": webs("v", 1)},
        spread(web("p"), min_domains=3),
        {"a1": "skew", "b1": "skew"},
        id="minDomains 3 with two zones treats global min as 0",
    ),
    pytest.param(
        [node("a1", "a"), node("b1", "b"), node("c1")],
        {},
        spread(web("p")),
        {"a1": "ok", "b1": "ok", "c1": "label"},
        id="a node without the topology key is unresolvable",
    ),
    pytest.param(
        [node("a1", "a"), node("b1", "b")],
        {"a1": [_other_ns("x1"), _other_ns("x2")]},
        spread(web("p")),
        {"a1": "ok", "b1": "ok"},
        id="pods in another namespace are not counted",
    ),
    pytest.param(
        [node("a1", "a"), node("b1", "b")],
        {"a1": [_terminating("t1"), _terminating("t2")]},
        spread(web("p")),
        {"a1": "ok", "b1": "ok"},
        id="terminating pods are not counted",
    ),
    pytest.param(
        [node("a1", "a"), node("b1", "b")],
        {"a1": webs("w", 1)},
        make_pod().name("p").label("app", "db").spread_constraint(1, "zone", WEB).obj(),
        {"a1": "ok", "b1": "ok"},
        id="a pod outside its own selector adds no self match",
    ),
    pytest.param(
        [node("a1", "a"), node("b1", "b"), node("c1", "c")],
        {"a1": webs("w", 1), "b1": webs("v", 2)},
        spread(web("p").node_affinity_in("zone", "a", "b")),
        {"a1": "ok", "b1": "skew", "c1": "ok"},
        id="nodeAffinityPolicy Honor leaves zones outside the pod's affinity out of the minimum",
    ),
    pytest.param(
        [node("a1", "a"), node("b1", "b"), node("c1", "c")],
        {"a1": webs("w", 1), "b1": webs("v", 2)},
        spread(web("p").node_affinity_in("zone", "a", "b"), node_affinity_policy="Ignore"),
        {"a1": "skew", "b1": "skew", "c1": "ok"},
        id="nodeAffinityPolicy Ignore counts every zone",
    ),
    pytest.param(
        [
            node("a1", "a"),
            node("b1", "b"),
            make_node().name("c1").label("zone", "c").taint("t").obj(),
        ],
        {"a1": webs("w", 1), "b1": webs("v", 1)},
        spread(web("p"), node_taints_policy="Honor"),
        {"a1": "ok", "b1": "ok", "c1": "ok"},
        id="nodeTaintsPolicy Honor leaves an untolerated tainted zone out of the minimum",
    ),
    pytest.param(
        [
            node("a1", "a"),
            node("b1", "b"),
            make_node().name("c1").label("zone", "c").taint("t").obj(),
        ],
        {"a1": webs("w", 1), "b1": webs("v", 1)},
        spread(web("p")),
        {"a1": "skew", "b1": "skew", "c1": "ok"},
        id="nodeTaintsPolicy Ignore by default counts the tainted zone",
    ),
    pytest.param(
        [
            node("a1", "a"),
            node("b1", "b"),
            make_node().name("c1").label("zone", "c").taint("t").obj(),
        ],
        {"a1": webs("w", 1), "b1": webs("v", 1)},
        spread(web("p").toleration("t"), node_taints_policy="Honor"),
        {"a1": "skew", "b1": "skew", "c1": "ok"},
        id="nodeTaintsPolicy Honor counts a tainted zone the pod tolerates",
    ),
    pytest.param(
        [node("a1", "a"), node("b1", "b")],
        {"a1": [web("w1", rev="1").obj(), web("w2", rev="1").obj()]},
        spread(web("p", rev="2"), match_label_keys=["rev"]),
        {"a1": "ok", "b1": "ok"},
        id="matchLabelKeys count only pods of the pod's own revision",
    ),
    pytest.param(
        [node("a1", "a"), node("b1", "b")],
        {"a1": [web("w1", rev="1").obj(), web("w2", rev="1").obj()]},
        spread(web("p", rev="2")),
        {"a1": "skew", "b1": "ok"},
        id="without matchLabelKeys every revision counts",
    ),
    pytest.param(
        [node("a1", "a", rack="r1"), node("b1", "b"), node("b2", "b", rack="r2")],
        {"a1": webs("w", 2), "b1": webs("v", 5)},
        web("p").spread_constraint(1, "zone", WEB).spread_constraint(9, "rack", WEB).obj(),
        {"a1": "skew", "b1": "label", "b2": "ok"},
        id="pods on a node missing another constraint's key are not counted",
    ),
    pytest.param(
        [node("a1", "a"), node("a2", "a", rack="r2"), node("b1", "b", rack="r1")],
        {"a2": webs("w", 2)},
        web("p").spread_constraint(1, "zone", WEB).spread_constraint(9, "rack", WEB).obj(),
        {"a1": "skew", "a2": "skew", "b1": "ok"},
        id="the first failing constraint decides the reason",
    ),
    pytest.param(
        [node("a1", "a"), node("b1", "b")],
        {"a1": webs("w", 5)},
        web("p").spread_constraint(1, "zone", LabelSelector()).obj(),
        {"a1": "ok", "b1": "ok"},
        id="an empty selector counts no pod and never rejects",
    ),
    pytest.param(
        [node("a1", "a"), node("a2", "a"), node("b1", "b")],
        {"a1": webs("w", 1)},
        spread(web("p"), key=HOST),
        {"a1": "skew", "a2": "ok", "b1": "ok"},
        id="hostname spreading rejects the node holding a web pod",
    ),
]


@pytest.mark.parametrize(("nodes", "pods_on", "pod", "expected"), FILTER_CASES)
def test_filter(
    nodes: list[Node],
    pods_on: Mapping[str, Sequence[Pod]],
    pod: Pod,
    expected: dict[str, str],
) -> None:
    table = table_of(nodes, pods_on=pods_on)
    assert run_filter(plugin(), pod, table) == expected


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod().name("p").obj(), id="a pod without constraints skips the filter"),
        pytest.param(
            web("p").spread_constraint(1, "zone", WEB, when="ScheduleAnyway").obj(),
            id="a pod with only ScheduleAnyway constraints skips the filter",
        ),
    ],
)
def test_pre_filter_skips(pod: Pod) -> None:
    table = table_of([node("a1", "a")])
    _, status = plugin().pre_filter(CycleState(), PodInfo.of(pod), table)
    assert status.code is Code.SKIP


def test_filter_without_pre_filter_is_an_error() -> None:
    table = table_of([node("a1", "a")])
    result = plugin().filter(CycleState(), PodInfo.of(spread(web("p"))), table)
    assert result.status.code is Code.ERROR


def test_a_gang_placed_pod_by_pod_stays_within_max_skew() -> None:
    table = table_of([node(f"n{i}", "abc"[i % 3]) for i in range(9)])
    pl = plugin()
    per_zone = {"a": 0, "b": 0, "c": 0}
    for i in range(12):
        pod = spread(web(f"g{i}"))
        verdict = run_filter(pl, pod, table)
        # Always the first feasible node in slot order: the worst greedy choice.
        target = next(name for name in table.index if verdict[name] == "ok")
        table.add_pod(PodInfo.of(pod), target)
        zone = table.label_value(table.index[target], "zone")
        assert zone is not None
        per_zone[zone] += 1
        assert max(per_zone.values()) - min(per_zone.values()) <= 1
    assert per_zone == {"a": 4, "b": 4, "c": 4}


def test_honored_taints_are_read_from_reused_taint_rows() -> None:
    # n1's taint leaves it and its row goes to n2's new taint: a node that lost its
    # taint counts again, the node that gained one does not.
    table = table_of([make_node().name("n1").taint("old").obj(), make_node().name("n2").obj()])
    assert [table.names[s] for s in tolerated_mask(table, web("p").obj()).nonzero()[0]] == ["n2"]
    table.update_node(make_node().name("n1").obj())
    table.update_node(make_node().name("n2").taint("new").obj())
    assert table.live_taint_ids() == [0] and table.taint_list[0].key == "new"
    assert [table.names[s] for s in tolerated_mask(table, web("p").obj()).nonzero()[0]] == ["n1"]
    tolerating = web("p").toleration("new").obj()
    assert sorted(table.names[s] for s in tolerated_mask(table, tolerating).nonzero()[0]) == [
        "n1",
        "n2",
    ]
