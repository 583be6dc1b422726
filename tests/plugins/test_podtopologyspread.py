"""PodTopologySpread: filter and score tables, args, hints, and the incremental counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from troupe.api.cycle import CycleState
from troupe.api.events import Action, Resource
from troupe.api.nodetable import NodeTable
from troupe.api.objects import (
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    OwnerReference,
    Pod,
)
from troupe.api.podcounts import CountsCache, PodClause, PodMatcher
from troupe.api.podinfo import PodInfo
from troupe.api.selectors import label_selector_matches
from troupe.api.status import Code
from troupe.plugins.podtopologyspread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    PodTopologySpread,
    PodTopologySpreadArgs,
)

from tests.plugins.builders import PodBuilder, make_node, make_pod, table_of
from tests.plugins.fakes import FakeHandle

HOST = "kubernetes.io/hostname"
WEB = {"app": "web"}


def node(name: str, zone: str | None = None, **labels: str) -> Node:
    b = make_node().name(name).label(HOST, name)
    if zone is not None:
        b.label("zone", zone)
    for k, v in labels.items():
        b.label(k, v)
    return b.obj()


def web(name: str, **labels: str) -> PodBuilder:
    return make_pod().name(name).labels(WEB).labels(labels)


def webs(prefix: str, n: int) -> list[Pod]:
    return [web(f"{prefix}{i}").obj() for i in range(n)]


def plugin(args: PodTopologySpreadArgs | None = None) -> PodTopologySpread:
    return PodTopologySpread(args, FakeHandle())


def run_filter(pl: PodTopologySpread, pod: Pod, table: NodeTable) -> dict[str, str]:
    """Node name -> "ok", "skew" (Unschedulable) or "label" (Unresolvable)."""
    info = PodInfo.of(pod)
    state = CycleState()
    _, status = pl.pre_filter(state, info, table)
    assert status.is_success
    result = pl.filter(state, info, table)
    verdict = {name: "ok" for name in table.index}
    for rejection in result.explain():
        kind = {
            ERR_REASON_CONSTRAINTS_NOT_MATCH: ("skew", Code.UNSCHEDULABLE),
            ERR_REASON_NODE_LABEL_NOT_MATCH: ("label", Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
        }[rejection.reason]
        assert rejection.code is kind[1]
        for name, slot in table.index.items():
            if rejection.nodes[slot]:
                assert verdict[name] == "ok", f"{name} got two reasons"
                verdict[name] = kind[0]
    for name, slot in table.index.items():
        assert bool(result.feasible[slot]) == (verdict[name] == "ok")
    return verdict


def spread(pod: PodBuilder, max_skew: int = 1, key: str = "zone", **kw: object) -> Pod:
    return pod.spread_constraint(max_skew, key, WEB, **kw).obj()  # type: ignore[arg-type]


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


# --- score -----------------------------------------------------------------------


def run_score(
    pl: PodTopologySpread, pod: Pod, table: NodeTable, scored: Sequence[str]
) -> list[int] | None:
    info = PodInfo.of(pod)
    state = CycleState()
    slots = np.array([table.index[n] for n in scored], dtype=np.intp)
    status = pl.pre_score(state, info, table, slots)
    if status.is_skip:
        return None
    assert status.is_success
    scores = pl.score(state, info, table, slots)
    pl.normalize_score(state, info, scores)
    return [int(s) for s in scores]


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


# --- queueing hints ----------------------------------------------------------------

TARGET = spread(web("target"))


def placed(pod: PodBuilder) -> Pod:
    return pod.node("n1").obj()


@pytest.mark.parametrize(
    ("old", "new", "queue"),
    [
        pytest.param(None, placed(web("w")), True, id="a matching pod placed queues"),
        pytest.param(
            None,
            placed(make_pod().name("d").label("app", "db")),
            False,
            id="a non-matching pod placed skips",
        ),
        pytest.param(None, web("w").obj(), False, id="an unplaced pod skips"),
        pytest.param(
            None, placed(web("w").namespace("other")), False, id="a pod of another namespace skips"
        ),
        pytest.param(placed(web("w")), None, True, id="a matching pod deleted queues"),
        pytest.param(
            placed(web("w")),
            placed(web("w").label("app", "db")),
            True,
            id="a pod relabelled out of the selector queues",
        ),
        pytest.param(
            placed(web("w")),
            placed(web("w").label("extra", "x")),
            False,
            id="a label change that keeps the match skips",
        ),
        pytest.param(
            placed(web("w")), placed(web("w")), False, id="an update without label change skips"
        ),
    ],
)
def test_pod_hint(old: Pod | None, new: Pod | None, queue: bool) -> None:
    hint = plugin().after_pod_change(TARGET, old, new)
    assert (hint.name == "QUEUE") is queue


def test_pod_hint_queues_on_own_new_toleration_with_taints_honored() -> None:
    target = spread(web("target"), node_taints_policy="Honor")
    updated = web("target").spread_constraint(1, "zone", WEB, node_taints_policy="Honor")
    hint = plugin().after_pod_change(target, target, updated.toleration("t").obj())
    assert hint.name == "QUEUE"


@pytest.mark.parametrize(
    ("old", "new", "queue"),
    [
        pytest.param(None, node("n", "a"), True, id="a node with the topology key added queues"),
        pytest.param(None, node("n"), False, id="a node without the topology key added skips"),
        pytest.param(node("n", "a"), None, True, id="a node with the key deleted queues"),
        pytest.param(node("n", "a"), node("n", "b"), True, id="a zone change queues"),
        pytest.param(node("n"), node("n", "a"), True, id="gaining the key queues"),
        pytest.param(
            node("n", "a"), node("n", "a", x="y"), False, id="an unrelated label change skips"
        ),
        pytest.param(
            node("n", "a"),
            make_node().name("n").label(HOST, "n").label("zone", "a").taint("t").obj(),
            True,
            id="a taint change on a node with the key queues",
        ),
    ],
)
def test_node_hint(old: Node | None, new: Node | None, queue: bool) -> None:
    hint = plugin().after_node_change(TARGET, old, new)
    assert (hint.name == "QUEUE") is queue


# --- incremental counts ------------------------------------------------------------

NAMESPACES = ("default", "other")
LABEL_SETS = ({"app": "web"}, {"app": "db"}, {"app": "web", "tier": "x"}, {})
MATCHERS = (
    PodMatcher((PodClause.of(frozenset({"default"}), LabelSelector(match_labels=WEB)),), True),
    PodMatcher((PodClause.of(None, LabelSelector(match_labels={"tier": "x"})),)),
    PodMatcher((PodClause.of(frozenset(NAMESPACES), LabelSelector()),)),
)

Op = tuple[str, int, int, int, bool]


def brute_counts(table: NodeTable, matcher: PodMatcher) -> list[int]:
    return [
        sum(1 for p in table.pods[s].values() if matcher.matches(p)) for s in range(table.capacity)
    ]


ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "add", "remove", "drop-node", "new-node"]),
        st.integers(0, 7),
        st.integers(0, len(LABEL_SETS) - 1),
        st.integers(0, 1),
        st.booleans(),
    ),
    max_size=60,
)


@settings(max_examples=120, deadline=None)
@given(ops)
def test_incremental_counts_equal_a_recount(sequence: list[Op]) -> None:
    table = table_of([node(f"n{i}", "ab"[i % 2]) for i in range(3)], capacity=2)
    cache = CountsCache(maxsize=len(MATCHERS))
    placed_pods: list[tuple[PodInfo, str]] = []
    serial = 0
    for step, (op, n, labels, ns, terminating) in enumerate(sequence):
        names = list(table.index)
        if op == "add" and names:
            b = make_pod().name(f"p{serial}").namespace(NAMESPACES[ns]).labels(LABEL_SETS[labels])
            serial += 1
            info = PodInfo.of((b.terminating() if terminating else b).obj())
            target = names[n % len(names)]
            table.add_pod(info, target)
            placed_pods.append((info, target))
        elif op == "remove" and placed_pods:
            info, target = placed_pods.pop(n % len(placed_pods))
            table.remove_pod(info, target)
        elif op == "drop-node" and names:
            gone = names[n % len(names)]
            table.remove_node(gone)
            placed_pods = [(i, t) for i, t in placed_pods if t != gone]
        elif op == "new-node":
            table.add_node(node(f"m{step}", "ab"[n % 2]))
        for matcher in MATCHERS:
            assert cache.counts(table, matcher).tolist() == brute_counts(table, matcher)


def test_counts_cache_evicts_the_least_recently_used() -> None:
    table = table_of([node("n0", "a")], pods_on={"n0": webs("w", 1)})
    cache = CountsCache(maxsize=2)
    for matcher in (*MATCHERS, MATCHERS[1]):
        cache.counts(table, matcher)
    assert len(cache) == 2
    assert MATCHERS[0] not in cache
    assert MATCHERS[1] in cache and MATCHERS[2] in cache


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=25))
def test_warm_filter_equals_a_cold_one(moves: list[tuple[int, bool]]) -> None:
    table = table_of([node(f"n{i}", "abc"[i % 3]) for i in range(6)])
    warm = plugin()
    pod = spread(web("p"), max_skew=1)
    infos: list[tuple[PodInfo, str]] = []
    for i, (n, remove) in enumerate(moves):
        if remove and infos:
            info, where = infos.pop()
            table.remove_pod(info, where)
        else:
            info = PodInfo.of(web(f"w{i}").obj())
            table.add_pod(info, f"n{n}")
            infos.append((info, f"n{n}"))
        assert run_filter(warm, pod, table) == run_filter(plugin(), pod, table)


KEYS = ("app", "tier", "bad key!")
VALUES = ("web", "db", "")
requirements = st.builds(
    lambda k, op, vs: LabelSelectorRequirement(key=k, operator=op, values=list(vs)),
    st.sampled_from(KEYS),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    st.lists(st.sampled_from(VALUES), max_size=2),
)
selectors = st.none() | st.builds(
    lambda labels, exprs: LabelSelector(match_labels=labels, match_expressions=exprs),
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
    st.lists(requirements, max_size=2),
)


@settings(max_examples=200, deadline=None)
@given(selectors, st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3))
def test_pod_clause_matches_like_the_selector_matcher(
    selector: LabelSelector | None, labels: dict[str, str]
) -> None:
    clause = PodClause.of(None, selector)
    assert clause.matches("any", labels) is label_selector_matches(selector, labels)


def test_registered_events() -> None:
    events = {(e.event.resource, e.event.action) for e in plugin().events_to_register()}
    assert events == {
        (Resource.ASSIGNED_POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE),
        (Resource.POD, Action.UPDATE_POD_TOLERATIONS),
        (
            Resource.NODE,
            Action.ADD | Action.DELETE | Action.UPDATE_NODE_LABEL | Action.UPDATE_NODE_TAINT,
        ),
    }


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
