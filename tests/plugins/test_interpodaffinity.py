"""InterPodAffinity: filter and score tables, args, hints, and the carried-term counts."""

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
from troupe.api.objects import Node, Pod
from troupe.api.podcounts import CarriedCounts
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code
from troupe.plugins.interpodaffinity import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    InterPodAffinity,
    InterPodAffinityArgs,
)
from troupe.plugins.interpodaffinity.plugin import after_node_change, after_pod_change
from troupe.plugins.interpodaffinity.terms import Carried, carried_terms

from tests.plugins.builders import PodBuilder, make_node, make_pod, table_of
from tests.plugins.fakes import FakeHandle

HOST = "kubernetes.io/hostname"
WEB = {"app": "web"}
DB = {"app": "db"}
REASONS = {
    ERR_REASON_AFFINITY_RULES_NOT_MATCH: ("affinity", Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: ("anti", Code.UNSCHEDULABLE),
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: ("existing", Code.UNSCHEDULABLE),
}


def node(name: str, zone: str | None = None, **labels: str) -> Node:
    b = make_node().name(name).label(HOST, name)
    if zone is not None:
        b.label("zone", zone)
    for k, v in labels.items():
        b.label(k, v)
    return b.obj()


def pod(name: str, labels: Mapping[str, str] = WEB) -> PodBuilder:
    return make_pod().name(name).labels(labels)


def plugin(args: InterPodAffinityArgs | None = None) -> InterPodAffinity:
    return InterPodAffinity(args, FakeHandle())


def run_filter(pl: InterPodAffinity, incoming: Pod, table: NodeTable) -> dict[str, str] | None:
    """Node name -> "ok" or the short reason; None when PreFilter skipped."""
    info = PodInfo.of(incoming)
    state = CycleState()
    _, status = pl.pre_filter(state, info, table)
    if status.is_skip:
        return None
    assert status.is_success
    result = pl.filter(state, info, table)
    verdict = {name: "ok" for name in table.index}
    for rejection in result.explain():
        short, code = REASONS[rejection.reason]
        assert rejection.code is code
        for name, slot in table.index.items():
            if rejection.nodes[slot]:
                assert verdict[name] == "ok", f"{name} got two reasons"
                verdict[name] = short
    for name, slot in table.index.items():
        assert bool(result.feasible[slot]) == (verdict[name] == "ok")
    return verdict


ZONES = [node("a1", "a"), node("a2", "a"), node("b1", "b")]

FILTER_CASES = [
    pytest.param(
        ZONES,
        {"a1": [pod("w").obj()]},
        pod("p", DB).pod_anti_affinity("zone", WEB).obj(),
        {"a1": "anti", "a2": "anti", "b1": "ok"},
        id="anti-affinity to app=web rejects nodes in the same zone as a web pod",
    ),
    pytest.param(
        ZONES,
        {"a1": [pod("w").obj()]},
        pod("p", DB).pod_anti_affinity(HOST, WEB).obj(),
        {"a1": "anti", "a2": "ok", "b1": "ok"},
        id="hostname anti-affinity rejects only the web pod's node",
    ),
    pytest.param(
        ZONES,
        {"a1": [pod("w").obj()]},
        pod("p", DB).pod_anti_affinity("zone", WEB, namespaces=["other"]).obj(),
        {"a1": "ok", "a2": "ok", "b1": "ok"},
        id="anti-affinity looking in another namespace ignores the web pod",
    ),
    pytest.param(
        ZONES,
        {"a1": [pod("w").namespace("other").obj()]},
        pod("p", DB).pod_anti_affinity("zone", WEB, namespace_selector={}).obj(),
        {"a1": "anti", "a2": "anti", "b1": "ok"},
        id="an empty namespaceSelector looks in every namespace",
    ),
    pytest.param(
        ZONES,
        {"a1": [pod("w").namespace("other").obj()]},
        pod("p", DB).pod_anti_affinity("zone", WEB, namespace_selector={"team": "x"}).obj(),
        {"a1": "ok", "a2": "ok", "b1": "ok"},
        id="a namespaceSelector with labels looks only in the listed namespaces",
    ),
    pytest.param(
        ZONES,
        {"a1": [pod("w").namespace("other").obj()]},
        pod("p", DB)
        .pod_anti_affinity("zone", WEB, namespaces=["other"], namespace_selector={"team": "x"})
        .obj(),
        {"a1": "anti", "a2": "anti", "b1": "ok"},
        id="a namespaceSelector with labels still looks in the listed namespaces",
    ),
    pytest.param(
        ZONES,
        {"a1": [pod("d", DB).pod_anti_affinity("zone", WEB).obj()]},
        pod("p").obj(),
        {"a1": "existing", "a2": "existing", "b1": "ok"},
        id="existing pod's anti-affinity rejects the incoming pod",
    ),
    pytest.param(
        ZONES,
        {"a1": [pod("d", DB).namespace("other").pod_anti_affinity("zone", WEB).obj()]},
        pod("p").obj(),
        None,
        id="existing pod's anti-affinity looks only in its own namespace",
    ),
    pytest.param(
        ZONES,
        {"a1": [pod("d", DB).obj()]},
        pod("p").pod_affinity("zone", DB).obj(),
        {"a1": "ok", "a2": "ok", "b1": "affinity"},
        id="affinity to app=db allows only the zone holding a db pod",
    ),
    pytest.param(
        ZONES,
        {},
        pod("p").pod_affinity("zone", WEB).obj(),
        {"a1": "ok", "a2": "ok", "b1": "ok"},
        id="affinity to self allowed when no pod matches yet",
    ),
    pytest.param(
        [*ZONES, node("c1")],
        {},
        pod("p").pod_affinity("zone", WEB).obj(),
        {"a1": "ok", "a2": "ok", "b1": "ok", "c1": "affinity"},
        id="affinity to self still needs the topology key on the node",
    ),
    pytest.param(
        ZONES,
        {},
        pod("p").pod_affinity("zone", DB).obj(),
        {"a1": "affinity", "a2": "affinity", "b1": "affinity"},
        id="affinity to app=db with no db pod anywhere rejects every node",
    ),
    pytest.param(
        ZONES,
        {"a1": [pod("d", DB).obj()], "b1": [pod("t", {"tier": "x"}).obj()]},
        pod("p").pod_affinity("zone", DB).pod_affinity("zone", {"tier": "x"}).obj(),
        {"a1": "affinity", "a2": "affinity", "b1": "affinity"},
        id="affinity needs one pod matching all terms",
    ),
    pytest.param(
        ZONES,
        {"b1": [pod("d", {"app": "db", "tier": "x"}).obj()]},
        pod("p").pod_affinity("zone", DB).pod_affinity(HOST, {"tier": "x"}).obj(),
        {"a1": "affinity", "a2": "affinity", "b1": "ok"},
        id="affinity with two topology keys needs the matching pod in both domains",
    ),
    pytest.param(
        ZONES,
        {"a1": [pod("d", {"app": "db", "rev": "1"}).obj()]},
        pod("p", {"app": "web", "rev": "2"})
        .pod_affinity("zone", DB, match_label_keys=["rev"])
        .obj(),
        {"a1": "affinity", "a2": "affinity", "b1": "affinity"},
        id="matchLabelKeys narrow affinity to pods with the pod's own value",
    ),
    pytest.param(
        ZONES,
        {"a1": [pod("w1", {"app": "web", "rev": "1"}).obj()]},
        pod("p", {"app": "web", "rev": "2"})
        .pod_anti_affinity("zone", WEB, mismatch_label_keys=["rev"])
        .obj(),
        {"a1": "anti", "a2": "anti", "b1": "ok"},
        id="mismatchLabelKeys aim anti-affinity at other revisions",
    ),
    pytest.param(
        ZONES,
        {"a1": [pod("w").obj()], "b1": [pod("d", DB).obj()]},
        pod("p", {"app": "x"}).pod_affinity("zone", DB).pod_anti_affinity("zone", WEB).obj(),
        {"a1": "affinity", "a2": "affinity", "b1": "ok"},
        id="a node failing affinity and anti-affinity reports affinity",
    ),
    pytest.param(
        ZONES,
        {"a1": [pod("w").obj(), pod("d", DB).pod_anti_affinity(HOST, {"app": "x"}).obj()]},
        pod("p", {"app": "x"}).pod_anti_affinity("zone", WEB).obj(),
        {"a1": "anti", "a2": "anti", "b1": "ok"},
        id="a node failing both anti-affinity kinds reports the incoming pod's",
    ),
]


@pytest.mark.parametrize(("nodes", "pods_on", "incoming", "expected"), FILTER_CASES)
def test_filter(
    nodes: list[Node],
    pods_on: Mapping[str, Sequence[Pod]],
    incoming: Pod,
    expected: dict[str, str] | None,
) -> None:
    table = table_of(nodes, pods_on=pods_on)
    assert run_filter(plugin(), incoming, table) == expected


@pytest.mark.parametrize(
    ("pods_on", "skips"),
    [
        pytest.param({}, True, id="no affinity pods at all skips the filter"),
        pytest.param(
            {"a1": [pod("d", DB).pod_anti_affinity("zone", DB).obj()]},
            True,
            id="an existing anti-affinity that does not match the pod skips the filter",
        ),
        pytest.param(
            {"a1": [pod("d", DB).pod_anti_affinity("zone", WEB).obj()]},
            False,
            id="an existing anti-affinity matching the pod runs the filter",
        ),
    ],
)
def test_pre_filter_skip(pods_on: Mapping[str, Sequence[Pod]], skips: bool) -> None:
    table = table_of(ZONES, pods_on=pods_on)
    _, status = plugin().pre_filter(CycleState(), PodInfo.of(pod("p").obj()), table)
    assert status.is_skip is skips


def test_existing_anti_affinity_follows_pods_placed_later() -> None:
    table = table_of(ZONES)
    pl = plugin()
    assert run_filter(pl, pod("p").obj(), table) is None
    holder = PodInfo.of(pod("d", DB).pod_anti_affinity("zone", WEB).obj())
    table.add_pod(holder, "b1")
    assert run_filter(pl, pod("p").obj(), table) == {"a1": "ok", "a2": "ok", "b1": "existing"}
    table.remove_pod(holder, "b1")
    assert run_filter(pl, pod("p").obj(), table) is None


# --- score -----------------------------------------------------------------------


def run_score(
    pl: InterPodAffinity, incoming: Pod, table: NodeTable, scored: Sequence[str]
) -> list[int] | None:
    info = PodInfo.of(incoming)
    state = CycleState()
    slots = np.array([table.index[n] for n in scored], dtype=np.intp)
    status = pl.pre_score(state, info, table, slots)
    if status.is_skip:
        return None
    assert status.is_success
    scores = pl.score(state, info, table, slots)
    pl.normalize_score(state, info, scores)
    return [int(s) for s in scores]


NAMES = ["a1", "a2", "b1"]
SCORE_CASES = [
    # raw: a1 +10 (db in zone a), a2 +10 -5 (web on a2), b1 0 -> 100, 50, 0.
    pytest.param(
        {"a1": [pod("d", DB).obj()], "a2": [pod("w").obj()]},
        pod("p", {"app": "x"})
        .pod_affinity("zone", DB, weight=10)
        .pod_anti_affinity(HOST, WEB, weight=5),
        None,
        [100, 50, 0],
        id="preferred affinity and anti-affinity of the incoming pod add up",
    ),
    # existing pod's required affinity to app=web in zone a: +1 for zone a.
    pytest.param(
        {"a1": [pod("d", DB).pod_affinity("zone", WEB).obj()]},
        pod("p"),
        None,
        [100, 100, 0],
        id="an existing pod's required affinity scores with hardPodAffinityWeight",
    ),
    pytest.param(
        {"a1": [pod("d", DB).pod_affinity("zone", WEB).obj()]},
        pod("p"),
        InterPodAffinityArgs(hard_pod_affinity_weight=0),
        None,
        id="hardPodAffinityWeight 0 ignores existing required affinity",
    ),
    # existing preferred anti-affinity -20 on b1: [0, 0, -20] -> 100, 100, 0.
    pytest.param(
        {"b1": [pod("d", DB).pod_anti_affinity(HOST, WEB, weight=20).obj()]},
        pod("p"),
        None,
        [100, 100, 0],
        id="an existing pod's preferred anti-affinity lowers its node",
    ),
    pytest.param(
        {"b1": [pod("d", DB).pod_anti_affinity(HOST, WEB, weight=20).obj()]},
        pod("p"),
        InterPodAffinityArgs(ignore_preferred_terms_of_existing_pods=True),
        None,
        id="ignorePreferredTermsOfExistingPods skips a pod without preferred terms",
    ),
    # raw: a1 +7 (existing preferred affinity, zone a), a2 +7 -10 = -3, b1 0.
    # min -3, max 7: a1 100*10/10=100, a2 0, b1 100*3/10=30.
    pytest.param(
        {
            "a1": [pod("d", DB).pod_affinity("zone", WEB, weight=7).obj()],
            "a2": [pod("e", {"app": "e"}).obj()],
        },
        pod("p").pod_anti_affinity(HOST, {"app": "e"}, weight=10),
        InterPodAffinityArgs(ignore_preferred_terms_of_existing_pods=True),
        [100, 0, 30],
        id="existing preferred terms still count when the incoming pod has its own",
    ),
    pytest.param(
        {"a1": [pod("d", DB).obj()]},
        pod("p"),
        None,
        None,
        id="no term anywhere skips scoring",
    ),
]


@pytest.mark.parametrize(("pods_on", "incoming", "args", "expected"), SCORE_CASES)
def test_score(
    pods_on: Mapping[str, Sequence[Pod]],
    incoming: PodBuilder,
    args: InterPodAffinityArgs | None,
    expected: list[int] | None,
) -> None:
    table = table_of(ZONES, pods_on=pods_on)
    assert run_score(plugin(args), incoming.obj(), table, NAMES) == expected


# --- args ---------------------------------------------------------------------------


def test_args_defaults_and_aliases() -> None:
    args = InterPodAffinityArgs.model_validate({})
    assert (args.hard_pod_affinity_weight, args.ignore_preferred_terms_of_existing_pods) == (
        1,
        False,
    )
    args = InterPodAffinityArgs.model_validate(
        {"hardPodAffinityWeight": 100, "ignorePreferredTermsOfExistingPods": True}
    )
    assert (args.hard_pod_affinity_weight, args.ignore_preferred_terms_of_existing_pods) == (
        100,
        True,
    )


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            {"hardPodAffinityWeight": 101}, id="hardPodAffinityWeight above 100 is rejected"
        ),
        pytest.param(
            {"hardPodAffinityWeight": -1}, id="a negative hardPodAffinityWeight is rejected"
        ),
        pytest.param({"hardPodAffinityWeigth": 1}, id="a misspelt field is rejected"),
    ],
)
def test_args_errors(raw: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        InterPodAffinityArgs.model_validate(raw)


# --- queueing hints ----------------------------------------------------------------

AFFINE = pod("target", {"app": "x"}).pod_affinity("zone", DB).obj()
ANTI = pod("target", {"app": "x"}).pod_anti_affinity("zone", WEB).obj()
PLAIN = pod("target", {"app": "x"}).obj()


def placed(b: PodBuilder) -> Pod:
    return b.node("n1").obj()


@pytest.mark.parametrize(
    ("target", "old", "new", "queue"),
    [
        pytest.param(
            AFFINE, None, placed(pod("d", DB)), True, id="a pod matching the affinity placed queues"
        ),
        pytest.param(
            AFFINE, None, placed(pod("w")), False, id="a pod not matching the affinity placed skips"
        ),
        pytest.param(AFFINE, None, pod("d", DB).obj(), False, id="an unplaced pod skips"),
        pytest.param(
            ANTI, placed(pod("w")), None, True, id="a deleted pod the anti-affinity matched queues"
        ),
        pytest.param(ANTI, placed(pod("d", DB)), None, False, id="a deleted unrelated pod skips"),
        pytest.param(
            PLAIN,
            placed(pod("d", DB).pod_anti_affinity("zone", {"app": "x"})),
            None,
            True,
            id="a deleted pod whose anti-affinity matched the target queues",
        ),
        pytest.param(
            AFFINE,
            placed(pod("d", {"app": "y"})),
            placed(pod("d", DB)),
            True,
            id="a pod relabelled into the affinity queues",
        ),
        pytest.param(
            ANTI,
            placed(pod("w")),
            placed(pod("w", {"app": "y"})),
            True,
            id="a pod relabelled out of the anti-affinity queues",
        ),
        pytest.param(
            ANTI,
            placed(pod("w", {"app": "y"})),
            placed(pod("w")),
            False,
            id="a pod relabelled into the anti-affinity skips",
        ),
    ],
)
def test_pod_hint(target: Pod, old: Pod | None, new: Pod | None, queue: bool) -> None:
    assert (after_pod_change(target, old, new).name == "QUEUE") is queue


@pytest.mark.parametrize(
    ("target", "old", "new", "queue"),
    [
        pytest.param(
            AFFINE, None, node("n", "a"), True, id="a node with the affinity key added queues"
        ),
        pytest.param(
            AFFINE, None, node("n"), False, id="a node without the affinity key added skips"
        ),
        pytest.param(
            AFFINE, node("n", "a"), node("n", "b"), True, id="a changed affinity key value queues"
        ),
        pytest.param(
            AFFINE,
            node("n", "a"),
            node("n", "a", x="y"),
            False,
            id="an unrelated label change skips",
        ),
        pytest.param(ANTI, None, node("n"), True, id="any node added queues an anti-affine pod"),
        pytest.param(
            ANTI, node("n", "a"), node("n"), True, id="losing the anti-affinity key queues"
        ),
        pytest.param(
            ANTI, node("n"), node("n", "a"), False, id="gaining the anti-affinity key skips"
        ),
        pytest.param(
            PLAIN,
            None,
            node("n"),
            True,
            id="a node added queues a pod held off by existing anti-affinity",
        ),
    ],
)
def test_node_hint(target: Pod, old: Node | None, new: Node | None, queue: bool) -> None:
    assert (after_node_change(target, old, new).name == "QUEUE") is queue


# --- carried-term counts -----------------------------------------------------------

CARRIERS = (
    pod("a", DB).pod_anti_affinity("zone", WEB),
    pod("b", DB).pod_anti_affinity("zone", WEB).pod_affinity(HOST, DB, weight=3),
    pod("c", WEB).pod_affinity("zone", DB),
    pod("d", WEB),
)


def brute_carried(table: NodeTable) -> dict[Carried, list[int]]:
    out: dict[Carried, list[int]] = {}
    for slot, pods in enumerate(table.pods):
        for info in pods.values():
            for key in carried_terms(info):
                out.setdefault(key, [0] * table.capacity)[slot] += 1
    return out


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "add", "remove", "drop-node", "new-node"]), st.integers(0, 9)
        ),
        max_size=50,
    )
)
def test_carried_counts_equal_a_recount(sequence: list[tuple[str, int]]) -> None:
    table = table_of([node(f"n{i}", "ab"[i % 2]) for i in range(3)], capacity=2)
    carried: CarriedCounts[Carried] = CarriedCounts(carried_terms)
    placed_pods: list[tuple[PodInfo, str]] = []
    for step, (op, n) in enumerate(sequence):
        names = list(table.index)
        if op == "add" and names:
            info = PodInfo.of(CARRIERS[n % len(CARRIERS)].name(f"p{step}").obj())
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
        got = {k: v.tolist() for k, v in carried.refresh(table).items()}
        assert got == brute_carried(table)


def test_registered_events() -> None:
    events = {(e.event.resource, e.event.action) for e in plugin().events_to_register()}
    assert events == {
        (Resource.ASSIGNED_POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE),
        (Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL),
    }


def test_a_gang_with_hostname_anti_affinity_takes_one_node_each() -> None:
    table = table_of(ZONES)
    pl = plugin()
    member = pod("g", {"gang": "g1"}).pod_anti_affinity(HOST, {"gang": "g1"})
    for i in range(3):
        verdict = run_filter(pl, member.name(f"g{i}").obj(), table)
        assert verdict is not None
        free = [n for n in NAMES if verdict[n] == "ok"]
        assert len(free) == 3 - i
        table.add_pod(PodInfo.of(member.name(f"g{i}").obj()), free[0])
    assert run_filter(pl, member.name("g3").obj(), table) == {
        "a1": "anti",
        "a2": "anti",
        "b1": "anti",
    }
