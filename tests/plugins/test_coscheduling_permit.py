"""Coscheduling's barrier: Permit waits for the quorum, Unreserve rejects the waiting
siblings, PostFilter rejects a gang far from quorum and backs the group off."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.cycle import CycleState
from troupe.api.framework import Diagnosis
from troupe.api.gangs import GangPolicy
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code
from troupe.plugins.coscheduling import (
    PODS_TO_ACTIVATE,
)
from troupe.plugins.coscheduling.plugin import (
    REJECTED_IN_POST_FILTER,
    REJECTED_IN_UNRESERVE,
    wait_seconds,
)

from tests.plugins.coscheduling_doubles import (
    OTHER,
    PG,
    CountingDirectory,
    Directory,
    Waiting,
    gang,
    keys,
    loner,
    member,
    plugin_for,
)

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
