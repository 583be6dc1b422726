"""PreEnqueue of a whole entity, on its own: a pod's plugins, or the gang checks of a group."""

from __future__ import annotations

import pytest
from troupe.api.gangs import GangPolicy, GroupProblem
from troupe.api.podinfo import PodInfo
from troupe.queue import (
    GANG_SCHEDULING,
    MIN_COUNT_MESSAGE,
    QueuedEntity,
    QueuedGroupInfo,
    QueuedPodInfo,
)
from troupe.queue.in_flight import InFlight
from troupe.queue.pre_enqueue import EntityGate, in_flight_message

from tests.plugins.builders import make_pod
from tests.queue.helpers import GATES, gang, groups_with, member, ref, scheduling_gates

MISSING_G = 'waiting for pods\'s workload "g" to appear in scheduling queue'
PROBLEM = GroupProblem(ref("g"), "spec.minMember", "must be at least 1")


def _group(*names: str) -> QueuedGroupInfo:
    entity = QueuedGroupInfo.of(ref("g"), 0.0)
    for name in names:
        info = PodInfo.of(member(name, "g"))
        entity.members[info.key] = info
    return entity


@pytest.mark.parametrize(
    ("policy", "problem", "placed", "members", "flying", "plugin", "message"),
    [
        pytest.param(gang(2), None, 0, ["a", "b"], None, "", "",
                     id="minCount members pass"),
        pytest.param(None, None, 0, ["a", "b"], None, GANG_SCHEDULING, MISSING_G,
                     id="a group whose object is missing waits for it"),
        pytest.param(gang(2), PROBLEM, 0, ["a", "b"], None, GANG_SCHEDULING, str(PROBLEM),
                     id="a group with a user error waits with the error"),
        pytest.param(gang(3), None, 0, ["a", "b"], None, GANG_SCHEDULING, MIN_COUNT_MESSAGE,
                     id="fewer members than minCount wait"),
        pytest.param(gang(3), None, 1, ["a", "b"], None, "", "",
                     id="placed members count toward the quorum"),
        pytest.param(gang(2), None, 0, ["a", "b"], "other", GANG_SCHEDULING,
                     in_flight_message(ref("g")),
                     id="another attempt of the group in flight holds late members back"),
        pytest.param(gang(2), None, 0, ["a", "b"], "self", "", "",
                     id="the entity's own flight does not hold it back"),
        pytest.param(GangPolicy(gang=False, min_count=0), None, 0, ["a"], None, "", "",
                     id="a Basic group has no quorum to wait for"),
    ],
)  # fmt: skip
def test_group_gate(
    policy: GangPolicy | None,
    problem: GroupProblem | None,
    placed: int,
    members: list[str],
    flying: str | None,
    plugin: str,
    message: str,
) -> None:
    groups = groups_with(g=policy)
    if problem is not None:
        groups.problems[ref("g").key] = problem
    groups.placed[ref("g").key] = placed
    in_flight = InFlight()
    entity = _group(*members)
    if flying is not None:
        in_flight.start(entity if flying == "self" else _group("z"))
    status = EntityGate(scheduling_gates, groups, in_flight)(entity)
    assert (status.is_success, status.plugin or "", status.message) == (
        not plugin,
        plugin,
        message,
    )


@pytest.mark.parametrize(
    ("entity", "plugin"),
    [
        pytest.param(QueuedPodInfo.of(make_pod().name("p").info(), 0.0), "",
                     id="a pod passes when its own PreEnqueue does"),
        pytest.param(QueuedPodInfo.of(make_pod().name("p").scheduling_gates("w").info(), 0.0),
                     GATES, id="a pod with scheduling gates is refused by SchedulingGates"),
    ],
)  # fmt: skip
def test_pod_gate(entity: QueuedEntity, plugin: str) -> None:
    status = EntityGate(scheduling_gates, groups_with(), InFlight())(entity)
    assert (status.is_success, status.plugin or "") == (not plugin, plugin)
