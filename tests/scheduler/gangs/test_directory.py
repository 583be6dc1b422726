"""GangDirectory: policies from the informers, placed members from the scheduler,
change notifications for the queue."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.gangapi import CoschedulingPodGroup, PodGroup, Workload
from troupe.api.gangs import POD_GROUP_LABEL, GangApi, GangPolicy, GroupKey, GroupRef
from troupe.api.objects import Pod
from troupe.scheduler.gangs import GangDirectory

NS = "team-a"
CREATED = "2026-01-01T00:00:00Z"


def cosched(
    name: str = "pg", min_member: int = 2, uid: str = "u1", **status: Any
) -> CoschedulingPodGroup:
    return CoschedulingPodGroup.model_validate(
        {
            "metadata": {"name": name, "namespace": NS, "uid": uid, "creationTimestamp": CREATED},
            "spec": {"minMember": min_member},
            "status": status,
        }
    )


def workload(name: str = "w", **groups: int) -> Workload:
    return Workload.model_validate(
        {
            "metadata": {"name": name, "namespace": NS, "uid": "wu", "creationTimestamp": CREATED},
            "spec": {
                "podGroups": [
                    {"name": g, "policy": {"gang": {"minCount": c}}} for g, c in groups.items()
                ]
            },
        }
    )


def pod_group(name: str = "pg", min_count: int = 2, class_name: str = "") -> PodGroup:
    return PodGroup.model_validate(
        {
            "metadata": {"name": name, "namespace": NS, "uid": "pu", "creationTimestamp": CREATED},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": min_count}},
                "priorityClassName": class_name,
            },
        }
    )


def member(name: str, group: str = "pg", scheduler: str = "troupe-scheduler") -> Pod:
    return Pod.model_validate(
        {
            "metadata": {"name": name, "namespace": NS, "labels": {POD_GROUP_LABEL: group}},
            "spec": {"schedulerName": scheduler},
        }
    )


def workload_member(name: str, pod_group_name: str, replica: str = "") -> Pod:
    return Pod.model_validate(
        {
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "workloadRef": {
                    "name": "w",
                    "podGroup": pod_group_name,
                    "podGroupReplicaKey": replica,
                }
            },
        }
    )


def ref(name: str = "pg") -> GroupRef:
    return GroupRef(GangApi.COSCHEDULING, NS, name)


def wref(pod_group_name: str, replica: str = "") -> GroupRef:
    return GroupRef(GangApi.WORKLOAD, NS, "w", pod_group_name, replica)


class Changes:
    def __init__(self, directory: GangDirectory) -> None:
        self.seen: list[str] = []
        directory.on_change(lambda r: self.seen.append(r.key))

    def take(self) -> list[str]:
        seen, self.seen = self.seen, []
        return seen


# --- policies --------------------------------------------------------------------------


def test_a_group_without_its_object_has_no_policy_and_no_problem() -> None:
    d = GangDirectory()
    assert d.policy(ref()) is None
    assert d.problem(ref()) is None


def test_a_group_has_its_objects_policy_until_the_object_is_deleted() -> None:
    d = GangDirectory()
    d.upsert(GangApi.COSCHEDULING, cosched(min_member=3))
    policy = d.policy(ref())
    assert policy is not None and policy.gang and policy.min_count == 3
    d.remove(GangApi.COSCHEDULING, NS, "pg")
    assert d.policy(ref()) is None


def test_a_spec_change_changes_the_policy() -> None:
    d = GangDirectory()
    d.upsert(GangApi.COSCHEDULING, cosched(min_member=3))
    assert d.policy(ref()) is not None
    d.upsert(GangApi.COSCHEDULING, cosched(min_member=5))
    policy = d.policy(ref())
    assert policy is not None and policy.min_count == 5


def test_a_malformed_object_gives_a_placeholder_policy_and_a_problem_naming_the_field() -> None:
    d = GangDirectory()
    d.upsert(GangApi.COSCHEDULING, cosched(min_member=0))
    assert d.policy(ref()) == GangPolicy(gang=True, min_count=1, created=1767225600.0)
    problem = d.problem(ref())
    assert problem is not None and problem.field == "spec.minMember"


def test_each_workload_pod_group_and_replica_is_its_own_group() -> None:
    d = GangDirectory()
    d.upsert(GangApi.WORKLOAD, workload(workers=4, ps=1))
    workers = d.policy(wref("workers", "r1"))
    ps = d.policy(wref("ps"))
    assert workers is not None and workers.min_count == 4
    assert ps is not None and ps.min_count == 1
    missing = d.problem(wref("nope"))
    assert missing is not None and missing.message.startswith(
        'pod group "nope" doesn\'t exist for a workload "w"'
    )
    assert [r.key for r in d.refs_for_object(GangApi.WORKLOAD, NS, "w")] == sorted(
        [wref("workers", "r1").key, wref("ps").key, wref("nope").key]
    )


def test_an_object_of_another_api_is_refused() -> None:
    d = GangDirectory()
    with pytest.raises(ValueError, match=r"not an object of scheduling\.k8s\.io/v1alpha1"):
        d.upsert(GangApi.WORKLOAD, cosched())


def test_priority_classes_changing_re_evaluates_pod_groups_that_name_one() -> None:
    classes = {"high": 100}
    d = GangDirectory(priority_of=classes.get)
    d.upsert(GangApi.POD_GROUP, pod_group(class_name="high"))
    pg_ref = GroupRef(GangApi.POD_GROUP, NS, "pg")
    changes = Changes(d)
    assert (p := d.policy(pg_ref)) is not None and p.priority == 100
    classes["high"] = 200
    assert (p := d.policy(pg_ref)) is not None and p.priority == 100  # cached until told
    d.priority_classes_changed()
    assert (p := d.policy(pg_ref)) is not None and p.priority == 200
    assert changes.take() == [pg_ref.key]


def test_the_object_as_last_seen_is_available() -> None:
    d = GangDirectory()
    assert d.get(GangApi.POD_GROUP, NS, "pg") is None
    d.upsert(GangApi.POD_GROUP, pod_group())
    assert isinstance(d.get(GangApi.POD_GROUP, NS, "pg"), PodGroup)


# --- change notification -----------------------------------------------------------------

CHANGES = [
    pytest.param([("upsert", cosched())], [ref().key], id="an object appearing notifies its group"),
    pytest.param(
        [("upsert", cosched()), ("upsert", cosched(phase="Running", running=2))],
        [ref().key],
        id="a status-only update does not notify",
    ),
    pytest.param(
        [("upsert", cosched()), ("upsert", cosched(min_member=5))],
        [ref().key, ref().key],
        id="a spec change notifies",
    ),
    pytest.param(
        [("upsert", cosched()), ("upsert", cosched(uid="u2"))],
        [ref().key, ref().key],
        id="a recreated object notifies",
    ),
    pytest.param(
        [("upsert", cosched()), ("remove", "pg")],
        [ref().key, ref().key],
        id="an object deleted notifies",
    ),
    pytest.param([("remove", "pg")], [], id="deleting an unknown object notifies nobody"),
]


@pytest.mark.parametrize(("steps", "expected"), CHANGES)
def test_change_notifications(steps: list[tuple[str, Any]], expected: list[str]) -> None:
    d = GangDirectory()
    changes = Changes(d)
    for action, arg in steps:
        if action == "upsert":
            d.upsert(GangApi.COSCHEDULING, arg)
        else:
            d.remove(GangApi.COSCHEDULING, NS, arg)
    assert changes.take() == expected


def test_a_workload_notifies_every_known_group_or_else_itself() -> None:
    d = GangDirectory()
    changes = Changes(d)
    d.upsert(GangApi.WORKLOAD, workload(workers=2))
    assert changes.take() == [GroupRef(GangApi.WORKLOAD, NS, "w").key]
    d.policy(wref("workers", "r1"))
    d.policy(wref("workers", "r2"))
    d.upsert(GangApi.WORKLOAD, workload(workers=3))
    assert changes.take() == [wref("workers", "r1").key, wref("workers", "r2").key]
    d.forget(wref("workers", "r1"))
    d.remove(GangApi.WORKLOAD, NS, "w")
    assert changes.take() == [wref("workers", "r2").key]


def test_a_failing_callback_does_not_stop_the_others() -> None:
    d = GangDirectory()

    def broken(_: GroupRef) -> None:
        raise RuntimeError("boom")

    d.on_change(broken)
    changes = Changes(d)
    d.upsert(GangApi.COSCHEDULING, cosched())
    assert changes.take() == [ref().key]


def test_an_unregistered_callback_hears_nothing() -> None:
    d = GangDirectory()
    seen: list[GroupRef] = []
    unregister = d.on_change(seen.append)
    unregister()
    d.upsert(GangApi.COSCHEDULING, cosched())
    assert seen == []


# --- placed members --------------------------------------------------------------------------


def test_placed_members_are_counted_once_and_released() -> None:
    d = GangDirectory()
    a, b = member("a"), member("b")
    d.pod_placed(a)
    d.pod_placed(a)
    d.pod_placed(b)
    assert d.placed_count(ref().key) == 2
    assert d.placed_members(ref().key) == {f"{NS}/a", f"{NS}/b"}
    d.pod_unplaced(a)
    d.pod_unplaced(a)
    assert d.placed_count(ref().key) == 1
    d.pod_unplaced(b)
    assert d.placed_count(ref().key) == 0
    assert d.placed_members(ref().key) == set()


def test_pods_without_a_group_are_ignored() -> None:
    d = GangDirectory()
    loner = Pod.model_validate({"metadata": {"name": "x", "namespace": NS}})
    d.pod_placed(loner)
    d.pod_unplaced(loner)
    assert d.placed_count(ref().key) == 0


def test_workload_replicas_count_their_own_members() -> None:
    d = GangDirectory()
    d.pod_placed(workload_member("a", "workers", "r1"))
    d.pod_placed(workload_member("b", "workers", "r2"))
    d.pod_placed(workload_member("c", "workers", "r2"))
    assert d.placed_count(wref("workers", "r1").key) == 1
    assert d.placed_count(wref("workers", "r2").key) == 2


def test_placed_members_is_a_copy() -> None:
    d = GangDirectory()
    d.pod_placed(member("a"))
    d.placed_members(ref().key).clear()
    assert d.placed_count(ref().key) == 1


@settings(max_examples=100)
@given(st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=5)), max_size=40))
def test_placed_count_is_the_set_of_placed_minus_released(ops: list[tuple[bool, int]]) -> None:
    d = GangDirectory()
    expected: set[str] = set()
    for placed, index in ops:
        pod = member(f"p{index}")
        if placed:
            d.pod_placed(pod)
            expected.add(pod.key)
        else:
            d.pod_unplaced(pod)
            expected.discard(pod.key)
    assert d.placed_count(ref().key) == len(expected)
    assert d.placed_members(ref().key) == expected


# --- members problems ----------------------------------------------------------------------

MEMBERS = [
    pytest.param(
        ["troupe-scheduler", "troupe-scheduler"], None, id="members naming one scheduler are fine"
    ),
    pytest.param(
        ["troupe-scheduler", "other", "troupe-scheduler"],
        "all pods in a single pod group should have the same .spec.schedulerName set, got "
        '"other" (p1), "troupe-scheduler" (p0, p2)',
        id="members naming two schedulers are a problem on spec.schedulerName",
    ),
    pytest.param(
        ["a", "b", "b", "b", "b", "b"],
        "all pods in a single pod group should have the same .spec.schedulerName set, got "
        '"a" (p0), "b" (p1, p2, p3 and 2 more)',
        id="a long list of pods is shortened",
    ),
    pytest.param([], None, id="no members is no problem"),
]


@pytest.mark.parametrize(("schedulers", "message"), MEMBERS)
def test_members_naming_different_schedulers_are_a_problem(
    schedulers: list[str], message: str | None
) -> None:
    d = GangDirectory()
    d.upsert(GangApi.COSCHEDULING, cosched())
    for i, s in enumerate(schedulers):
        d.pod_seen(member(f"p{i}", scheduler=s))
    problem = d.problem(ref())
    if message is None:
        assert problem is None
    else:
        assert problem is not None
        assert (problem.field, problem.message) == ("spec.schedulerName", message)


def test_a_members_problem_clears_once_the_odd_member_is_gone_and_the_queue_hears_both() -> None:
    d = GangDirectory()
    d.upsert(GangApi.COSCHEDULING, cosched())
    heard: list[str] = []
    d.on_change(lambda r: heard.append(r.key))
    d.pod_seen(member("a"))
    assert heard == []  # one scheduler: nothing to tell
    d.pod_seen(member("b", scheduler="x"))
    assert d.problem(ref()) is not None
    assert heard == [ref().key]
    assert d.policy(ref()) == GangPolicy(gang=True, min_count=2, created=1767225600.0)
    d.pod_gone(member("b", scheduler="x"))
    assert d.problem(ref()) is None
    assert heard == [ref().key, ref().key]


def test_an_object_problem_comes_before_a_members_problem() -> None:
    d = GangDirectory()
    d.upsert(GangApi.COSCHEDULING, cosched(min_member=0))
    d.pod_seen(member("a"))
    d.pod_seen(member("b", scheduler="x"))
    problem = d.problem(ref())
    assert problem is not None and problem.field == "spec.minMember"


def test_a_pod_moving_to_another_group_leaves_the_first() -> None:
    d = GangDirectory()
    d.pod_seen(member("a"))
    d.pod_seen(member("b", scheduler="x"))
    d.pod_seen(member("b", group="other", scheduler="x"))
    assert d.member_keys(ref().key) == {f"{NS}/a"}
    assert d.problem(ref()) is None


def test_forgetting_a_group_drops_its_members_problem_but_not_its_placements() -> None:
    d = GangDirectory()
    d.pod_placed(member("a"))
    d.pod_seen(member("a"))
    d.pod_seen(member("b", scheduler="x"))
    d.forget(ref())
    d.pod_gone(member("b", scheduler="x"))
    assert d.problem(ref()) is None
    assert d.placed_count(ref().key) == 1
    d.forget(ref())  # twice is harmless


def _remembered(d: GangDirectory) -> int:
    """How many per-group entries the directory keeps (refs, verdicts, members)."""
    return (
        sum(len(refs) for refs in d._refs.values())
        + len(d._verdicts)
        + d._tally.entries()
        + len(d._member_problems)
    )


@pytest.mark.parametrize("object_last", [False, True], ids=["pods go last", "object goes last"])
def test_a_group_is_forgotten_once_its_object_and_all_its_pods_are_gone(
    object_last: bool,
) -> None:
    d = GangDirectory()
    for i in range(100):
        group = f"g{i}"
        d.upsert(GangApi.COSCHEDULING, cosched(group, uid=f"u{i}"))
        pods = [member(f"{group}-a", group), member(f"{group}-b", group, scheduler="x")]
        for pod in pods:
            d.pod_seen(pod)
        gref = GroupRef(GangApi.COSCHEDULING, NS, group)
        assert d.policy(gref) is not None and d.problem(gref) is not None
        if object_last:
            for pod in pods:
                d.pod_gone(pod)
            assert _remembered(d) > 0  # the object still exists
            d.remove(GangApi.COSCHEDULING, NS, group)
        else:
            d.remove(GangApi.COSCHEDULING, NS, group)
            assert _remembered(d) > 0  # its pods still exist
            for pod in pods:
                d.pod_gone(pod)
        assert _remembered(d) == 0


def test_a_pod_naming_a_group_that_never_existed_is_forgotten_with_it() -> None:
    d = GangDirectory()
    d.pod_seen(member("a", group="ghost"))
    assert d.policy(GroupRef(GangApi.COSCHEDULING, NS, "ghost")) is None
    d.pod_gone(member("a", group="ghost"))
    assert _remembered(d) == 0


def test_member_keys_follow_pods_that_name_the_group() -> None:
    directory = GangDirectory()

    def member(name: str) -> Pod:
        return Pod.model_validate(
            {
                "metadata": {
                    "name": name,
                    "namespace": "ml",
                    "labels": {"scheduling.x-k8s.io/pod-group": "train"},
                }
            }
        )

    a, b = member("a"), member("b")
    directory.pod_seen(a)
    directory.pod_seen(b)
    directory.pod_seen(a)
    assert directory.member_keys(GroupKey("ml/train")) == {"ml/a", "ml/b"}
    directory.pod_gone(a)
    assert directory.member_keys(GroupKey("ml/train")) == {"ml/b"}
    directory.pod_gone(b)
    assert directory.member_keys(GroupKey("ml/train")) == set()
