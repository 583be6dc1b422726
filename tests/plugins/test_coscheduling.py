"""Coscheduling (scheduler-plugins' Permit barrier): the extension points it serves,
PreFilter's quorum and minResources checks, and the capacity arithmetic."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.cycle import CycleState
from troupe.api.framework import Diagnosis
from troupe.api.gangs import GangPolicy
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Node
from troupe.api.podinfo import PodInfo
from troupe.api.quantity import MAX_AMOUNT
from troupe.api.status import Code
from troupe.plugins.coscheduling import (
    Coscheduling,
)
from troupe.plugins.coscheduling.capacity import resource_gap
from troupe.plugins.registry import extension_points_of

from tests.plugins.builders import make_pod, table_of
from tests.plugins.coscheduling_doubles import (
    GPU,
    PG,
    CountingDirectory,
    Directory,
    gang,
    keys,
    loner,
    member,
    node,
    plugin_for,
    running,
)

# --- the contract ------------------------------------------------------------------


def test_it_serves_upstreams_extension_points() -> None:
    assert extension_points_of(Coscheduling) == {
        "queueSort",
        "preFilter",
        "postFilter",
        "reserve",
        "permit",
    }


def test_it_asks_to_be_retried_when_a_pod_or_a_pod_group_appears() -> None:
    plugin, _ = plugin_for(Directory())
    events = [str(e.event) for e in plugin.events_to_register()]
    assert events == ["UnscheduledPodAdd", "PodGroupAddOrUpdate"]


# --- PreFilter -----------------------------------------------------------------------


@dataclass(frozen=True)
class PreFilterCase:
    pod: PodInfo
    policy: GangPolicy | None = None
    members: int | None = 3  # pods that exist for the group; None: not countable
    placed: int = 0
    problem: str = ""
    nodes: tuple[Node, ...] = (node("n1"), node("n2"))
    pods_on: dict[str, list[PodInfo]] = field(default_factory=dict)
    code: Code = Code.SUCCESS
    message: str = ""


PRE_FILTER_CASES = [
    pytest.param(PreFilterCase(loner()), id="a pod in no group passes"),
    pytest.param(
        PreFilterCase(
            member("p1"),
            None,
            code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            message="PodGroup not found",
        ),
        id="a pod whose PodGroup does not exist is rejected as unresolvable",
    ),
    pytest.param(
        PreFilterCase(
            member("p1"),
            gang(2),
            problem="must be at least 1",
            code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            message="scheduling.x-k8s.io/v1alpha1 default/pg: spec.minMember: must be at least 1",
        ),
        id="a group with a bad field is rejected naming the object and the field",
    ),
    pytest.param(
        PreFilterCase(member("p1"), GangPolicy(gang=False, min_count=5), members=1),
        id="a Basic group is scheduled as if the pod had none",
    ),
    pytest.param(
        PreFilterCase(
            member("p1"),
            gang(3),
            members=2,
            code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            message="pre-filter pod p1 cannot find enough sibling pods, "
            "current pods number: 2, minMember of group: 3",
        ),
        id="fewer pods than minMember are rejected",
    ),
    pytest.param(PreFilterCase(member("p1"), gang(3), members=3), id="minMember pods pass"),
    pytest.param(
        PreFilterCase(member("p1"), gang(3), members=None),
        id="without sibling counts the count is not checked",
    ),
    pytest.param(
        PreFilterCase(member("p1"), gang(2, min_resources={"cpu": 6000})),
        id="minResources the free capacity holds pass, across nodes",
    ),
    pytest.param(
        PreFilterCase(
            member("p1"),
            gang(2, min_resources={"cpu": 10000}),
            code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            message="resource gap: map[cpu:2]",
        ),
        id="minResources beyond the free capacity are rejected with the gap",
    ),
    pytest.param(
        PreFilterCase(
            member("p1"),
            gang(2, min_resources={"cpu": 4000}),
            nodes=(node("n1", cpu="3"), node("n2", cpu="3")),
            pods_on={"n1": [running("a", cpu="2")], "n2": [running("b", cpu="1")]},
            code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            message="resource gap: map[cpu:1]",
        ),
        id="capacity other pods hold is not free",
    ),
    pytest.param(
        PreFilterCase(
            member("p1"),
            gang(2, min_resources={"cpu": 4000}),
            placed=1,
            nodes=(node("n1", cpu="3"), node("n2", cpu="3")),
            pods_on={"n1": [member("pg-0", cpu="2")], "n2": [running("b", cpu="1")]},
        ),
        id="capacity the group's own placed pods hold counts as free",
    ),
    pytest.param(
        PreFilterCase(
            member("p1"),
            gang(3, min_resources={"cpu": 1000}),
            nodes=(node("n1", pods=1), node("n2", pods=1)),
            code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            message="resource gap: map[pods:1]",
        ),
        id="minMember pods need as many free pod slots",
    ),
    pytest.param(
        PreFilterCase(
            member("p1"),
            gang(2, min_resources={GPU: 1, "cpu": 1500}),
            code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            message=f"resource gap: map[{GPU}:1]",
        ),
        id="a resource no node offers is a gap of the whole request",
    ),
]


@pytest.mark.parametrize("case", PRE_FILTER_CASES)
def test_pre_filter(case: PreFilterCase) -> None:
    policies = {PG: case.policy} if case.policy else {}
    problems = {PG: case.problem} if case.problem else {}
    groups = (
        Directory(policies, problems, {PG: case.placed})
        if case.members is None
        else CountingDirectory(policies, problems, {PG: case.placed}, {PG: keys(case.members)})
    )
    plugin, handle = plugin_for(groups, table_of(case.nodes, case.pods_on))
    result, status = plugin.pre_filter(CycleState(), case.pod, handle.table)
    assert result is None
    assert (status.code, status.message) == (case.code, case.message)


def fill(table: NodeTable, cpu: str) -> None:
    for name in table.index:
        table.add_pod(make_pod().name(f"hog-{name}").req(cpu=cpu).info(), name)


def test_a_group_that_passed_minresources_is_not_checked_again_until_its_ttl() -> None:
    groups = CountingDirectory({PG: gang(2, min_resources={"cpu": 4000})}, members={PG: keys(2)})
    plugin, handle = plugin_for(groups, table_of([node("n1")]), permitWaitingTimeSeconds=30)
    assert plugin.pre_filter(CycleState(), member("p1"), handle.table)[1].is_success
    fill(handle.table, "4")
    handle.clock.advance(30)
    assert plugin.pre_filter(CycleState(), member("p2"), handle.table)[1].is_success
    handle.clock.advance(0.001)
    status = plugin.pre_filter(CycleState(), member("p2"), handle.table)[1]
    assert status.message == "resource gap: map[cpu:4]"


@pytest.mark.parametrize(
    "forget",
    [
        pytest.param("unreserve", id="Unreserve makes the group's minResources be checked again"),
        pytest.param(
            "post_filter", id="PostFilter makes the group's minResources be checked again"
        ),
    ],
)
def test_forgetting_a_permitted_group(forget: str) -> None:
    groups = CountingDirectory({PG: gang(2, min_resources={"cpu": 4000})}, members={PG: keys(2)})
    plugin, handle = plugin_for(groups, table_of([node("n1")]))
    assert plugin.pre_filter(CycleState(), member("p1"), handle.table)[1].is_success
    fill(handle.table, "4")
    if forget == "unreserve":
        plugin.unreserve(CycleState(), member("p1"), "n1")
    else:
        plugin.post_filter(CycleState(), member("p1"), handle.table, Diagnosis())
    status = plugin.pre_filter(CycleState(), member("p2"), handle.table)[1]
    assert status.message == "resource gap: map[cpu:4]"


# --- minResources arithmetic -------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 8), st.integers(0, 10)), max_size=5),
    st.integers(0, 20),
)
def test_the_capacity_walk_equals_upstreams_node_by_node_subtraction(
    nodes: list[tuple[int, int]], wanted: int
) -> None:
    """Nodes given as (cpu cores, cores requested); overcommitted nodes free less than 0."""
    table = table_of(
        [node(f"n{i}", cpu=str(cores)) for i, (cores, _) in enumerate(nodes)],
        {f"n{i}": [running(f"p{i}", cpu=str(used))] for i, (_, used) in enumerate(nodes)},
    )
    gap = resource_gap(table, {"cpu": wanted * 1000}, PG, lambda _: None, False)
    left, covered = wanted * 1000, False
    for cores, used in nodes:  # the walk of upstream CheckClusterResource
        left -= (cores - used) * 1000
        if left <= 0:
            covered = True
            break
    assert gap == ({} if covered else {"cpu": left})


def test_the_capacity_walk_stays_exact_where_an_int64_sum_would_wrap() -> None:
    # 1,000 nodes each overcommitted by the most troupe holds: the free total is
    # -1e19, past int64; numpy's own sum would wrap to a large positive number.
    table = table_of([node(f"n{i}", cpu="1") for i in range(1000)])
    hog = PodInfo.of(make_pod().name("hog").req(**{"example.com/w": "1e19"}).obj(), cap=True)
    for i in range(1000):
        table.add_pod(hog, f"n{i}")
    gap = resource_gap(table, {"example.com/w": 1}, PG, lambda _: None, False)
    assert gap == {"example.com/w": 1 + 1000 * MAX_AMOUNT}


def test_no_nodes_leave_the_whole_request_as_the_gap() -> None:
    assert resource_gap(NodeTable(), {"cpu": 0, "pods": 2}, PG, lambda _: None, False) == {
        "cpu": 0,
        "pods": 2,
    }
