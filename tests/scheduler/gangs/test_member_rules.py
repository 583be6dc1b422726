"""Member rules as upstream's pod-group cycle (``validatePodGroup``, Kubernetes 1.37):
members of a standalone PodGroup share its priority and scheduler name, else the group
fails with ``SchedulerError``; and ``PodGroupInitiallyScheduled`` is terminal once True."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.gangapi import POD_GROUP_INITIALLY_SCHEDULED, Condition, V1beta1PodGroup
from troupe.api.gangs import GangApi, GroupRef
from troupe.api.objects import Pod
from troupe.scheduler.gangs import GangDirectory
from troupe.scheduler.gangs.status import pod_group_scheduled_condition

NS = "ml"


def group(**spec: Any) -> V1beta1PodGroup:
    return V1beta1PodGroup.model_validate(
        {
            "metadata": {"name": "pg", "namespace": NS, "uid": "u"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, **spec},
        }
    )


def member(name: str, priority: int | None = None, scheduler: str = "troupe-scheduler") -> Pod:
    spec: dict[str, Any] = {"schedulingGroup": {"podGroupName": "pg"}, "schedulerName": scheduler}
    if priority is not None:
        spec["priority"] = priority
    return Pod.model_validate({"metadata": {"name": name, "namespace": NS}, "spec": spec})


REF = GroupRef(GangApi.POD_GROUP, NS, "pg")


@pytest.mark.parametrize(
    ("spec", "priorities", "message"),
    [
        pytest.param({"priority": 10}, [10, 10], None, id="members with the group's priority"),
        pytest.param(
            {"priority": 10},
            [10, 9],
            "all pods in a single pod group should have the same priority as the pod group's "
            "priority, got 9 (p1), 10 (p0); the pod group's priority is 10",
            id="a member below the group's priority",
        ),
        pytest.param(
            {"priority": 9},
            [10, 10],
            "all pods in a single pod group should have the same priority as the pod group's "
            "priority, got 10 (p0, p1); the pod group's priority is 9",
            id="members agreeing with each other but not with the group",
        ),
        pytest.param({}, [5, 5], None, id="no group priority and members agreeing"),
        pytest.param(
            {},
            [5, None],
            "all pods in a single pod group should have the same priority as the pod group's "
            "priority, got 0 (p1), 5 (p0)",
            id="no group priority and members differing (unset is 0)",
        ),
    ],
)
def test_members_must_have_the_groups_priority(
    spec: dict[str, Any], priorities: list[int | None], message: str | None
) -> None:
    d = GangDirectory()
    d.upsert(GangApi.POD_GROUP, group(**spec))
    for i, priority in enumerate(priorities):
        d.pod_seen(member(f"p{i}", priority))
    problem = d.problem(REF)
    if message is None:
        assert problem is None
        return
    assert problem is not None
    assert (problem.field, problem.message, problem.outcome) == (
        "spec.priority",
        message,
        "SchedulerError",
    )
    assert str(problem).startswith("scheduling.k8s.io/v1beta1 ml/pg: spec.priority: ")


def test_the_queue_hears_when_a_priority_problem_comes_and_goes() -> None:
    d = GangDirectory()
    d.upsert(GangApi.POD_GROUP, group(priority=10))
    heard: list[str] = []
    d.on_change(lambda ref: heard.append(ref.key))
    d.pod_seen(member("p0", 10))
    odd = member("p1", 3)
    d.pod_seen(odd)
    assert d.problem(REF) is not None and heard
    heard.clear()
    d.pod_gone(odd)
    assert d.problem(REF) is None and heard


def test_a_group_priority_change_re_evaluates_the_members() -> None:
    d = GangDirectory(priority_of={"high": 10, "low": 5}.get)
    d.upsert(GangApi.POD_GROUP, group(priorityClassName="high"))
    d.pod_seen(member("p0", 5))
    assert d.problem(REF) is not None
    d.upsert(GangApi.POD_GROUP, group(priorityClassName="low"))
    assert d.problem(REF) is None


def test_members_naming_different_schedulers_fail_with_scheduler_error() -> None:
    d = GangDirectory()
    d.upsert(GangApi.POD_GROUP, group())
    d.pod_seen(member("p0"))
    d.pod_seen(member("p1", scheduler="default-scheduler"))
    problem = d.problem(REF)
    assert problem is not None
    assert problem.outcome == "SchedulerError"
    assert problem.message == (
        "all pods in a single pod group should have the same .spec.schedulerName set, got "
        '"default-scheduler" (p1), "troupe-scheduler" (p0)'
    )


def test_pod_group_initially_scheduled_is_terminal_once_true() -> None:
    true = pod_group_scheduled_condition(
        [], "Scheduled", "", 1.0, condition_type=POD_GROUP_INITIALLY_SCHEDULED
    )
    assert [(c.type, c.status, c.reason) for c in true] == [
        (POD_GROUP_INITIALLY_SCHEDULED, "True", "Scheduled")
    ]
    for outcome in ("Unschedulable", "SchedulerError", "Scheduled"):
        again = pod_group_scheduled_condition(
            true, outcome, "later", 2.0, condition_type=POD_GROUP_INITIALLY_SCHEDULED
        )
        assert again == true
    false = pod_group_scheduled_condition(
        [], "SchedulerError", "why", 1.0, condition_type=POD_GROUP_INITIALLY_SCHEDULED
    )
    assert [(c.status, c.reason, c.message) for c in false] == [("False", "SchedulerError", "why")]
    assert isinstance(false[0], Condition)
