"""Coscheduling: scheduler-plugins' Permit barrier, extension point by extension point.

A fake GroupDirectory stands in for the informers (policies, placed counts, and the
members that exist), fake waiting pods record what the plugin allowed or rejected, and
a FakeClock moves time for the backoff and the permitted-group cache.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.clock import FakeClock
from troupe.api.config import ConfigError, ResolvedConfig, load_config
from troupe.api.cycle import CycleState
from troupe.api.framework import Diagnosis, Sortable
from troupe.api.gangs import POD_GROUP_LABEL, GangPolicy, GroupKey, GroupProblem, GroupRef
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Node
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.plugins.coscheduling import (
    PODS_TO_ACTIVATE,
    Coscheduling,
    CoschedulingArgs,
)
from troupe.plugins.coscheduling.capacity import resource_gap
from troupe.plugins.coscheduling.plugin import (
    REJECTED_IN_POST_FILTER,
    REJECTED_IN_UNRESERVE,
    wait_seconds,
)
from troupe.plugins.registry import catalog, default_registry, extension_points_of
from troupe.queue.entity import QueuedPodInfo

from tests.plugins.builders import make_node, make_pod, table_of

PG = GroupKey("default/pg")
OTHER = GroupKey("default/other")
GPU = "nvidia.com/gpu"


# --- doubles -------------------------------------------------------------------------


@dataclass
class Directory:
    """GroupDirectory without sibling counts (the bare troupe.api contract)."""

    policies: dict[str, GangPolicy] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    placed: dict[str, int] = field(default_factory=dict)

    def policy(self, ref: GroupRef) -> GangPolicy | None:
        return self.policies.get(ref.key)

    def problem(self, ref: GroupRef) -> GroupProblem | None:
        message = self.problems.get(ref.key)
        return GroupProblem(ref, "spec.minMember", message) if message else None

    def placed_count(self, key: GroupKey) -> int:
        return self.placed.get(key, 0)


@dataclass
class CountingDirectory(Directory):
    """GroupDirectory that also knows which pods exist for each group."""

    members: dict[str, set[str]] = field(default_factory=dict)

    def member_keys(self, key: GroupKey) -> Collection[str]:
        return self.members.get(key, set())


@dataclass
class Waiting:
    pod: PodInfo
    allowed: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)

    def allow(self, plugin: str) -> None:
        self.allowed.append(plugin)

    def reject(self, plugin: str, message: str) -> None:
        self.rejected.append((plugin, message))


class GangHandle:
    def __init__(self, groups: Directory, table: NodeTable | None = None) -> None:
        self.groups = groups
        self.table = table if table is not None else NodeTable()
        self.clock = FakeClock()
        self.client = None
        self.scheduler_name = "troupe-scheduler"
        self.waiting: list[Waiting] = []

    def get_waiting_pod(self, key: str) -> Waiting | None:
        return next((w for w in self.waiting if w.pod.key == key), None)

    def iterate_waiting_pods(self) -> Sequence[Waiting]:
        return list(self.waiting)


def gang(min_count: int, **fields: object) -> GangPolicy:
    return GangPolicy(gang=True, min_count=min_count, **fields)  # type: ignore[arg-type]


def member(name: str, group: str = "pg", cpu: str | None = None) -> PodInfo:
    return make_pod().name(name).label(POD_GROUP_LABEL, group).req(cpu=cpu).info()


def loner(name: str = "solo") -> PodInfo:
    return make_pod().name(name).info()


def running(name: str, cpu: str) -> PodInfo:
    return make_pod().name(name).req(cpu=cpu).info()


def keys(count: int, group: str = "pg") -> set[str]:
    return {f"default/{group}-{i}" for i in range(count)}


def node(name: str, cpu: str = "4", pods: int = 110) -> Node:
    return make_node().name(name).capacity(cpu=cpu, memory="8Gi", pods=pods).obj()


def plugin_for(
    groups: Directory, table: NodeTable | None = None, **args: int
) -> tuple[Coscheduling, GangHandle]:
    handle = GangHandle(groups, table)
    model = CoschedulingArgs.model_validate(args) if args else None
    return Coscheduling(model, handle), handle


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


# --- Permit --------------------------------------------------------------------------


@dataclass(frozen=True)
class PermitCase:
    pod: PodInfo
    policy: GangPolicy | None
    placed: int  # bound + assumed, this pod included (it was assumed before Permit)
    code: Code
    timeout: float = 0.0
    message: str = ""


PERMIT_CASES = [
    pytest.param(PermitCase(loner(), None, 0, Code.SUCCESS), id="a pod in no group passes"),
    pytest.param(
        PermitCase(member("p1"), None, 1, Code.UNSCHEDULABLE, message="PodGroup not found"),
        id="a pod whose PodGroup does not exist is rejected",
    ),
    pytest.param(
        PermitCase(member("p1"), GangPolicy(gang=False, min_count=3), 1, Code.SUCCESS),
        id="a Basic group does not wait",
    ),
    pytest.param(
        PermitCase(member("p1"), gang(3), 2, Code.WAIT, timeout=60.0),
        id="below quorum the pod waits for permitWaitingTimeSeconds",
    ),
    pytest.param(
        PermitCase(member("p1"), gang(3, timeout_seconds=15.0), 1, Code.WAIT, timeout=15.0),
        id="below quorum the pod waits for the group's scheduleTimeoutSeconds",
    ),
    pytest.param(
        PermitCase(member("p1"), gang(3), 3, Code.SUCCESS),
        id="the member that completes the quorum passes",
    ),
    pytest.param(
        PermitCase(member("p1"), gang(3), 5, Code.SUCCESS),
        id="members beyond the quorum pass",
    ),
]


@pytest.mark.parametrize("case", PERMIT_CASES)
def test_permit(case: PermitCase) -> None:
    groups = Directory({PG: case.policy} if case.policy else {}, placed={PG: case.placed})
    plugin, _ = plugin_for(groups)
    status, timeout = plugin.permit(CycleState(), case.pod, "n1")
    assert (status.code, timeout, status.message) == (case.code, case.timeout, case.message)


def test_reaching_quorum_allows_every_waiting_sibling_and_no_one_else() -> None:
    groups = Directory({PG: gang(3), OTHER: gang(2)}, placed={PG: 3, OTHER: 1})
    plugin, handle = plugin_for(groups)
    siblings = [Waiting(member("pg-0")), Waiting(member("pg-1"))]
    stranger = Waiting(member("other-0", group="other"))
    handle.waiting = [siblings[0], stranger, siblings[1]]
    status, _ = plugin.permit(CycleState(), member("pg-2"), "n1")
    assert status.is_success
    assert [w.allowed for w in siblings] == [["Coscheduling"], ["Coscheduling"]]
    assert stranger.allowed == [] and stranger.rejected == []


@pytest.mark.parametrize(
    ("group_timeout", "permit_waiting", "expected"),
    [
        pytest.param(None, 60, 60.0, id="the args' wait when the group sets none"),
        pytest.param(10.0, 60, 10.0, id="the group's scheduleTimeoutSeconds first"),
        pytest.param(0.0, 30, 30.0, id="a zero group timeout falls back to the args"),
        pytest.param(None, 0, 60.0, id="zero everywhere is upstream's 60 s default"),
        pytest.param(0.0, 0, 0.0, id="a zero group timeout with zero args waits 0 s"),
    ],
)
def test_wait_time(group_timeout: float | None, permit_waiting: int, expected: float) -> None:
    assert wait_seconds(gang(2, timeout_seconds=group_timeout), permit_waiting) == expected


@pytest.mark.parametrize(
    ("placed", "activated"),
    [
        pytest.param(
            1, keys(3) - {"default/pg-0"}, id="the first member to wait activates its siblings"
        ),
        pytest.param(2, set(), id="later members to wait do not"),
    ],
)
def test_the_first_waiting_member_asks_for_its_siblings(placed: int, activated: set[str]) -> None:
    groups = CountingDirectory({PG: gang(3)}, placed={PG: placed}, members={PG: keys(3)})
    plugin, _ = plugin_for(groups)
    state = CycleState()
    state.write(PODS_TO_ACTIVATE, set())
    status, _ = plugin.permit(state, member("pg-0"), "n1")
    assert status.is_wait
    assert state.read(PODS_TO_ACTIVATE) == activated


def test_without_the_scheduler_asking_nothing_is_activated() -> None:
    groups = CountingDirectory({PG: gang(3)}, placed={PG: 1}, members={PG: keys(3)})
    plugin, _ = plugin_for(groups)
    state = CycleState()
    assert plugin.permit(state, member("pg-0"), "n1")[0].is_wait
    assert state.get(PODS_TO_ACTIVATE) is None


@settings(max_examples=100, deadline=None)
@given(min_count=st.integers(1, 8), arrivals=st.integers(0, 12))
def test_no_member_is_let_through_before_the_quorum_is_placed(
    min_count: int, arrivals: int
) -> None:
    groups = Directory({PG: gang(min_count)})
    plugin, handle = plugin_for(groups)
    passed: list[str] = []
    for i in range(arrivals):
        pod = member(f"pg-{i}")
        groups.placed[PG] = i + 1  # assumed before Permit
        status, _ = plugin.permit(CycleState(), pod, "n1")
        if status.is_wait:
            handle.waiting.append(Waiting(pod))
        else:
            assert status.is_success
            passed.append(pod.key)
    released = passed + [w.pod.key for w in handle.waiting if w.allowed]
    if arrivals < min_count:
        assert released == []
    else:
        assert sorted(released) == sorted(f"default/pg-{i}" for i in range(arrivals))


# --- Unreserve -----------------------------------------------------------------------


def test_unreserve_rejects_every_waiting_sibling_and_no_one_else() -> None:
    groups = Directory({PG: gang(3), OTHER: gang(2)}, placed={PG: 2})
    plugin, handle = plugin_for(groups)
    siblings = [Waiting(member("pg-0")), Waiting(member("pg-1"))]
    stranger = Waiting(member("other-0", group="other"))
    handle.waiting = [*siblings, stranger]
    plugin.unreserve(CycleState(), member("pg-2"), "n1")
    assert [w.rejected for w in siblings] == [[("Coscheduling", REJECTED_IN_UNRESERVE)]] * 2
    assert stranger.rejected == []


@pytest.mark.parametrize(
    ("pod", "policies"),
    [
        pytest.param(loner(), {PG: gang(2)}, id="a pod in no group rejects no one"),
        pytest.param(member("pg-2"), {}, id="a pod whose group is gone rejects no one"),
    ],
)
def test_unreserve_without_a_gang(pod: PodInfo, policies: dict[str, GangPolicy]) -> None:
    plugin, handle = plugin_for(Directory(policies))
    handle.waiting = [Waiting(member("pg-0"))]
    plugin.unreserve(CycleState(), pod, "n1")
    assert handle.waiting[0].rejected == []


# --- PostFilter ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("min_count", "assigned", "percentage", "gives_up"),
    [
        pytest.param(3, 0, 10, True, id="a gang far from quorum is given up"),
        pytest.param(3, 3, 10, False, id="a gang at quorum keeps its members"),
        pytest.param(10, 9, 10, False, id="a gang 10% short keeps its members"),
        pytest.param(10, 8, 10, True, id="a gang 20% short is given up"),
        pytest.param(10, 9, 0, True, id="percentage 0 gives up on any shortfall"),
        pytest.param(10, 0, 100, False, id="percentage 100 never gives up"),
    ],
)
def test_post_filter_rejects_the_waiting_members_of_a_gang_far_from_quorum(
    min_count: int, assigned: int, percentage: int, gives_up: bool
) -> None:
    groups = Directory({PG: gang(min_count), OTHER: gang(2)}, placed={PG: assigned})
    plugin, handle = plugin_for(groups, podGroupRejectPercentage=percentage)
    sibling, stranger = Waiting(member("pg-0")), Waiting(member("other-0", group="other"))
    handle.waiting = [sibling, stranger]
    result, status = plugin.post_filter(CycleState(), member("p9"), handle.table, Diagnosis())
    assert result is not None and result.nominated_node_name == ""
    assert status.code is Code.UNSCHEDULABLE
    if gives_up:
        assert sibling.rejected == [("Coscheduling", REJECTED_IN_POST_FILTER)]
        assert status.message == (
            "PodGroup default/pg gets rejected due to Pod p9 is unschedulable even after PostFilter"
        )
    else:
        assert sibling.rejected == [] and status.message == ""
    assert stranger.rejected == []


@pytest.mark.parametrize(
    ("pod", "policies", "message"),
    [
        pytest.param(member("p1"), {}, "can not find pod group", id="a missing group is named"),
        pytest.param(loner(), {}, "", id="a pod in no group gets no message"),
    ],
)
def test_post_filter_without_a_group(
    pod: PodInfo, policies: dict[str, GangPolicy], message: str
) -> None:
    plugin, handle = plugin_for(Directory(policies))
    _, status = plugin.post_filter(CycleState(), pod, handle.table, Diagnosis())
    assert (status.code, status.message) == (Code.UNSCHEDULABLE, message)


BACKED_OFF = "podGroup default/pg failed recently"


@pytest.mark.parametrize(
    ("backoff", "members", "backed_off"),
    [
        pytest.param(10, 3, True, id="a gang whose pods all exist is backed off"),
        pytest.param(10, 2, False, id="a gang still missing pods is not backed off"),
        pytest.param(10, None, True, id="without sibling counts the gang is backed off"),
        pytest.param(0, 3, False, id="podGroupBackoffSeconds 0 backs nothing off"),
    ],
)
def test_giving_up_backs_the_group_off(backoff: int, members: int | None, backed_off: bool) -> None:
    policies: dict[str, GangPolicy] = {PG: gang(3)}
    groups = (
        CountingDirectory(policies, members={PG: keys(members)})
        if members is not None
        else Directory(policies)
    )
    plugin, handle = plugin_for(groups, podGroupBackoffSeconds=backoff)
    plugin.post_filter(CycleState(), member("pg-0"), handle.table, Diagnosis())
    status = plugin.pre_filter(CycleState(), member("pg-1"), handle.table)[1]
    assert (status.message == BACKED_OFF) is backed_off
    if backed_off:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_the_backoff_window_runs_on_the_injected_clock_and_is_not_extended() -> None:
    groups = CountingDirectory({PG: gang(3)}, members={PG: keys(3)})
    plugin, handle = plugin_for(groups, podGroupBackoffSeconds=10)

    def pre_filter_message() -> str:
        return plugin.pre_filter(CycleState(), member("pg-1"), handle.table)[1].message

    plugin.post_filter(CycleState(), member("pg-0"), handle.table, Diagnosis())
    handle.clock.advance(6)
    # A second failure inside the window does not push its end out (go-cache Add).
    plugin.post_filter(CycleState(), member("pg-2"), handle.table, Diagnosis())
    handle.clock.advance(4)
    assert pre_filter_message() == BACKED_OFF  # upstream's entry lives until strictly past
    handle.clock.advance(0.001)
    assert pre_filter_message() == ""


# --- QueueSort -----------------------------------------------------------------------

CLOCK = FakeClock()  # the handle's clock: monotonic 1000.0 is wall 1.8e9
WALL_AT_1000 = CLOCK.wall()


def queued(info: PodInfo, at: float, priority: int = 0) -> QueuedPodInfo:
    entity = QueuedPodInfo.of(info, at)
    entity.priority = priority
    return entity


def sorter(policies: dict[str, GangPolicy]) -> Coscheduling:
    return plugin_for(Directory(policies))[0]


SORT_POLICIES = {
    PG: gang(2, created=WALL_AT_1000 - 100),  # created long before anyone queued
    OTHER: gang(2, created=WALL_AT_1000 + 50),
}


@pytest.mark.parametrize(
    ("a", "b", "a_first"),
    [
        pytest.param(
            queued(loner("a"), 900.0, priority=10),
            queued(member("b"), 800.0),
            True,
            id="higher priority first, whatever the group's age",
        ),
        pytest.param(
            queued(member("z"), 990.0),
            queued(loner("a"), 950.0),
            True,
            id="a member of an older group goes before an earlier queued pod",
        ),
        pytest.param(
            queued(loner("a"), 1020.0),
            queued(member("b", group="other"), 1000.0),
            True,
            id="a pod queued before a group was created goes first",
        ),
        pytest.param(
            queued(member("b"), 950.0),
            queued(member("a"), 990.0),
            False,
            id="members of one group go by pod key, not by queueing time",
        ),
        pytest.param(
            queued(member("a", group="unknown"), 960.0),
            queued(loner("b"), 950.0),
            False,
            id="a member of a group that does not exist goes by its own queueing time",
        ),
        pytest.param(
            queued(loner("a"), 950.0), queued(loner("a"), 950.0), False, id="no pod before itself"
        ),
    ],
)
def test_less(a: QueuedPodInfo, b: QueuedPodInfo, a_first: bool) -> None:
    assert sorter(SORT_POLICIES).less(a, b) is a_first


entities = st.builds(
    queued,
    st.sampled_from(
        [
            loner("a"),
            loner("b"),
            member("c"),
            member("d"),
            member("e", group="other"),
            member("f", group="unknown"),
        ]
    ),
    st.sampled_from([850.0, 900.0, 1050.0]),
    st.integers(0, 1),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(entities, min_size=1, max_size=6))
def test_the_order_is_upstreams_sort_key(items: list[QueuedPodInfo]) -> None:
    plugin = sorter(SORT_POLICIES)

    def sort_key(e: QueuedPodInfo) -> tuple[int, float, str]:
        group = e.pod.metadata.labels.get(POD_GROUP_LABEL)
        policy = SORT_POLICIES.get(f"default/{group}")
        since = policy.created if policy else e.timestamp - 1000.0 + WALL_AT_1000
        return (-e.priority, since, e.key)

    for a in items:
        for b in items:
            assert plugin.less(a, b) is (sort_key(a) < sort_key(b))


def test_a_sortable_that_is_not_a_pod_goes_by_its_own_time() -> None:
    @dataclass(frozen=True)
    class Entity:
        key: str
        priority: int
        timestamp: float

    plugin = sorter(SORT_POLICIES)
    early: Sortable = Entity("z", 0, 900.0)
    assert plugin.less(early, queued(loner("a"), 950.0))


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


def test_no_nodes_leave_the_whole_request_as_the_gap() -> None:
    assert resource_gap(NodeTable(), {"cpu": 0, "pods": 2}, PG, lambda _: None, False) == {
        "cpu": 0,
        "pods": 2,
    }


# --- args ----------------------------------------------------------------------------

CATALOG = catalog(default_registry())


def scheduler_plugins_profile(args: dict[str, object]) -> ResolvedConfig:
    return load_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            # scheduler-plugins' documented profile, unchanged.
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                        "queueSort": {
                            "enabled": [{"name": "Coscheduling"}],
                            "disabled": [{"name": "*"}],
                        },
                    },
                    "pluginConfig": [{"name": "Coscheduling", "args": args}],
                }
            ],
        },
        CATALOG,
    )


def coscheduling_args(args: dict[str, object]) -> CoschedulingArgs:
    model = scheduler_plugins_profile(args).profiles[0].args["Coscheduling"]
    assert isinstance(model, CoschedulingArgs)
    return model


def test_scheduler_plugins_documented_profile_loads_unchanged() -> None:
    profile = scheduler_plugins_profile({}).profiles[0]
    assert profile.names("queueSort") == ("Coscheduling",)
    for point in ("preFilter", "postFilter", "reserve", "permit"):
        assert "Coscheduling" in profile.names(point), point


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param({}, (60, 0, 10), id="upstream's defaults"),
        pytest.param(
            {
                "permitWaitingTimeSeconds": 5,
                "podGroupBackoffSeconds": 30,
                "podGroupRejectPercentage": 0,
            },
            (5, 30, 0),
            id="camelCase fields as scheduler-plugins writes them",
        ),
    ],
)
def test_args_load(args: dict[str, object], expected: tuple[int, int, int]) -> None:
    model = coscheduling_args(args)
    assert (
        model.permit_waiting_time_seconds,
        model.pod_group_backoff_seconds,
        model.pod_group_reject_percentage,
    ) == expected


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        pytest.param(
            {"permitWaitingTimeSeconds": -1},
            "permitWaitingTimeSeconds: Invalid value: -1: must be greater than or equal to 0",
            id="a negative permit wait is refused",
        ),
        pytest.param(
            {"podGroupBackoffSeconds": -5},
            "podGroupBackoffSeconds: Invalid value: -5: must be greater than or equal to 0",
            id="a negative backoff is refused",
        ),
        pytest.param(
            {"podGroupRejectPercentage": 101},
            "podGroupRejectPercentage: Invalid value: 101: must be between 0 and 100",
            id="a percentage above 100 is refused",
        ),
        pytest.param(
            {"podGroupRejectPercentage": -1},
            "podGroupRejectPercentage: Invalid value: -1: must be between 0 and 100",
            id="a negative percentage is refused",
        ),
        pytest.param(
            {"deniedPGExpirationTimeSeconds": 3},
            "deniedPGExpirationTimeSeconds: unknown field",
            id="an argument upstream dropped is an unknown field",
        ),
    ],
)
def test_bad_args_are_refused_naming_the_field(args: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        coscheduling_args(args)
    assert info.value.problems == [f"profiles[0].pluginConfig[0].args.{problem}"]


def test_a_plugin_built_without_args_uses_the_defaults() -> None:
    groups = Directory({PG: gang(2)}, placed={PG: 1})
    plugin, _ = plugin_for(groups)
    assert plugin.permit(CycleState(), member("p1"), "n1") == (Status(Code.WAIT), 60.0)
