"""InterPodAffinity Filter: required affinity and anti-affinity, existing pods'
anti-affinity, and the carried-term counts behind it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.cycle import CycleState
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Node, Pod
from troupe.api.podcounts import CarriedCounts
from troupe.api.podinfo import PodInfo
from troupe.plugins.interpodaffinity.terms import Carried, carried_terms

from tests.plugins.builders import table_of
from tests.plugins.interpod_helpers import (
    DB,
    HOST,
    NAMES,
    WEB,
    ZONES,
    node,
    plugin,
    pod,
    run_filter,
)
from tests.plugins.table_churn import TableChurn

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
            for key in carried_terms(info.record):
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
    churn = TableChurn(table, node)
    for step, (op, n) in enumerate(sequence):
        carrier = CARRIERS[n % len(CARRIERS)].name(f"p{step}").obj()
        churn.step(step, op, n, PodInfo.of(carrier))
        got = {k: v.tolist() for k, v in carried.refresh(table).items()}
        assert got == brute_carried(table)


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
