"""Pod groups in the queue: gating and release, pop order, policy changes, identity and counts."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from troupe.api.gangs import GangApi, GangPolicy, GroupProblem, GroupRef
from troupe.api.objects import Pod
from troupe.queue import GANG_SCHEDULING, MIN_COUNT_MESSAGE, QueuedGroupInfo
from troupe.queue.pre_enqueue import in_flight_message

from tests.plugins.builders import make_pod
from tests.queue.helpers import (
    BASIC,
    GATES,
    FakeGroups,
    Harness,
    gang,
    groups_with,
    harness,
    member,
    pod,
    ref,
)

G = "default/g"
MISSING_G = 'waiting for pods\'s workload "g" to appear in scheduling queue'
PROBLEM = GroupProblem(ref("g"), "spec.minMember", "must be at least 1")


def ungated(p: Pod) -> Pod:
    new = p.model_copy(deep=True)
    new.spec.scheduling_gates = []
    return new


# --- PreEnqueue of a group ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "problem", "placed", "pods", "where", "message"),
    [
        pytest.param(None, None, 0, [member("a", "g"), member("b", "g")], "gated", MISSING_G,
                     id="members of a group whose object is missing wait for it to appear"),
        pytest.param(gang(2), PROBLEM, 0, [member("a", "g"), member("b", "g")], "gated",
                     "scheduling.x-k8s.io/v1alpha1 default/g: spec.minMember: must be at least 1",
                     id="a group with a user error waits with the error as message"),
        pytest.param(gang(3), None, 0, [member("a", "g"), member("b", "g")], "gated",
                     MIN_COUNT_MESSAGE, id="fewer members than minCount wait for more"),
        pytest.param(gang(2), None, 0, [member("a", "g"), member("b", "g")], "active", "",
                     id="minCount members make the group active"),
        pytest.param(gang(3), None, 2, [member("a", "g")], "active", "",
                     id="members already placed count toward the quorum"),
        pytest.param(gang(2), None, 0, [member("a", "g"), member("b", "g", 0, "wait")], "gated",
                     MIN_COUNT_MESSAGE,
                     id="a member held by its own scheduling gate does not count toward minCount"),
    ],
)  # fmt: skip
def test_group_gate(
    policy: GangPolicy | None,
    problem: GroupProblem | None,
    placed: int,
    pods: list[Pod],
    where: str,
    message: str,
) -> None:
    groups = groups_with(g=policy)
    if problem is not None:
        groups.problems[ref("g").key] = problem
    groups.placed[ref("g").key] = placed
    h = harness(groups=groups)
    for p in pods:
        h.queue.add(p)
    assert h.queue.where_group(G) == where
    entity = h.queue.get_group(G)
    assert entity is not None and entity.kind == "podgroup"
    assert (entity.gating_plugin, entity.gating_message) == (
        GANG_SCHEDULING if message else "",
        message,
    )
    assert all(h.queue.where(p.key) == "gated" for p in pods if p.spec.scheduling_gates)


def test_a_member_held_by_its_gate_waits_alone_and_joins_its_group_when_the_gate_goes() -> None:
    h = harness(groups=groups_with(g=gang(2)))
    gated = member("b", "g", 0, "wait")
    h.queue.add(member("a", "g"))
    h.queue.add(gated)
    alone = h.queue.get("default/b")
    assert alone is not None and alone.kind == "pod" and alone.gating_plugin == GATES
    h.queue.update(gated, ungated(gated))
    assert h.queue.where_group(G) == "active"
    assert h.members_of(G) == ["default/a", "default/b"]


def test_basic_policy_pods_are_queued_as_single_pods() -> None:
    h = harness(groups=groups_with(g=BASIC))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    assert h.queue.where_group(G) is None
    assert [h.queue.where(k) for k in ("default/a", "default/b")] == ["active", "active"]
    assert {h.pop().kind, h.pop().kind} == {"pod"}


def test_workload_replicas_are_separate_groups_released_by_their_object_key() -> None:
    groups = FakeGroups()
    h = harness(groups=groups)
    replicas = [GroupRef(GangApi.WORKLOAD, "default", "wl", "workers", r) for r in ("0", "1")]
    for r in replicas:
        h.queue.add(
            make_pod().name(f"w{r.replica_key}").workload_ref("wl", "workers", r.replica_key).obj()
        )
    waiting = [h.queue.get_group(r.key) for r in replicas]
    assert [e.gating_message if e else None for e in waiting] == [
        'waiting for pods\'s workload "wl" to appear in scheduling queue'
    ] * 2
    for r in replicas:
        groups.policies[r.key] = gang(1)
    h.queue.group_changed("default/wl")
    assert [h.queue.where_group(r.key) for r in replicas] == ["active", "active"]


# --- release and re-gating -----------------------------------------------------------------


def _last_member_arrives(h: Harness) -> None:
    h.queue.add(member("c", "g"))


def _group_object_appears(h: Harness) -> None:
    h.groups.set("g", gang(2))
    h.queue.group_changed(ref("g"))


def _group_object_appears_by_object_key(h: Harness) -> None:
    h.groups.set("g", gang(2))
    h.queue.group_changed("default/g")


def _problem_fixed(h: Harness) -> None:
    h.groups.problems.clear()
    h.queue.group_changed(ref("g"))


def _gate_removed(h: Harness) -> None:
    h.queue.update(member("c", "g", 0, "wait"), member("c", "g"))


@pytest.mark.parametrize(
    ("policy", "problem", "third", "release"),
    [
        pytest.param(gang(3), None, None, _last_member_arrives, id="the last member arriving"),
        pytest.param(None, None, None, _group_object_appears, id="the group object appearing"),
        pytest.param(None, None, None, _group_object_appears_by_object_key,
                     id="the group object appearing, named by its object key"),
        pytest.param(gang(2), PROBLEM, None, _problem_fixed, id="the group's error being fixed"),
        pytest.param(gang(3), None, member("c", "g", 0, "wait"), _gate_removed,
                     id="a member's scheduling gate being removed"),
    ],
)  # fmt: skip
def test_a_gated_group_is_released_by(
    policy: GangPolicy | None,
    problem: GroupProblem | None,
    third: Pod | None,
    release: Callable[[Harness], None],
) -> None:
    groups = groups_with(g=policy)
    if problem is not None:
        groups.problems[ref("g").key] = problem
    h = harness(groups=groups)
    for p in (member("a", "g"), member("b", "g"), third):
        if p is not None:
            h.queue.add(p)
    assert h.queue.where_group(G) == "gated"
    release(h)
    assert h.queue.where_group(G) == "active"
    assert h.pop().kind == "podgroup"


def _group_deleted(h: Harness) -> None:
    h.groups.set("g", None)
    h.queue.group_changed(ref("g"))


def _member_deleted(h: Harness) -> None:
    h.queue.delete(member("a", "g"))


def _problem_appears(h: Harness) -> None:
    h.groups.problems[ref("g").key] = PROBLEM
    h.queue.group_changed(ref("g"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(_group_deleted, MISSING_G, id="its group object is deleted"),
        pytest.param(_member_deleted, MIN_COUNT_MESSAGE, id="a member is deleted below minCount"),
        pytest.param(_problem_appears, str(PROBLEM), id="the group gets an error"),
    ],
)
def test_an_active_group_is_gated_again_when(
    change: Callable[[Harness], None], message: str
) -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    assert h.queue.where_group(G) == "active"
    change(h)
    assert h.queue.where_group(G) == "gated"
    entity = h.queue.get_group(G)
    assert entity is not None and entity.gating_message == message
    assert h.queue.pop_nowait() is None


def test_members_arriving_after_the_quorum_was_placed_are_scheduled_at_once() -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    first = h.pop_group()
    h.groups.placed[ref("g").key] = 2
    h.queue.done(first.key, first)
    h.queue.add(member("c", "g"))
    late = h.pop_group()
    assert late is not first and list(late.members) == ["default/c"]


def test_a_member_arriving_during_an_attempt_waits_for_it_then_goes_if_the_quorum_holds() -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    h.pop_group()
    h.queue.add(member("c", "g"))
    held = h.queue.get("default/c")
    assert held is not None and held.gating_message == in_flight_message(ref("g"))
    assert h.queue.where("default/a") == "in_flight"
    h.groups.placed[ref("g").key] = 2
    h.queue.done(G)  # the group key alone finds the flight
    assert h.queue.where("default/c") == "active"
    assert h.queue.where("default/a") is None


# --- pop order ------------------------------------------------------------------------------

WALL_AT_START = 1_800_000_000.0  # FakeClock's wall time at its start (monotonic 1000)


@pytest.mark.parametrize(
    ("steps", "policies", "order"),
    [
        pytest.param([pod("p", 5), member("a", "g", 1)], {"g": gang(1)}, ["default/p", G],
                     id="a higher-priority pod pops before a group"),
        pytest.param([pod("p", 5), member("a", "g")], {"g": gang(1, priority=9)}, [G, "default/p"],
                     id="a group whose policy sets a higher priority pops first"),
        pytest.param([member("a", "g", 10), member("b", "g", 1), pod("p", 5)], {"g": gang(2)},
                     ["default/p", G], id="a group's priority is its lowest member's"),
        pytest.param([pod("p"), 1.0, member("a", "g")],
                     {"g": gang(1, created=WALL_AT_START - 5)}, [G, "default/p"],
                     id="at equal priority a group created before the pod arrived pops first"),
        pytest.param([pod("p"), 1.0, member("a", "g")], {"g": gang(1)}, ["default/p", G],
                     id="without a creation time a group is ordered by its first member's arrival"),
        pytest.param([member("b", "b"), member("a", "a")],
                     {"a": gang(1, created=WALL_AT_START), "b": gang(1, created=WALL_AT_START)},
                     ["default/a", "default/b"],
                     id="groups created at the same time pop in key order"),
    ],
)  # fmt: skip
def test_pop_order_between_pods_and_groups(
    steps: list[Pod | float], policies: dict[str, GangPolicy], order: list[str]
) -> None:
    h = harness(groups=groups_with(**policies))
    for step in steps:
        if isinstance(step, float):
            h.clock.advance(step)
        else:
            h.queue.add(step)
    assert [h.pop().key for _ in order] == order


def test_a_member_priority_update_re_sorts_its_group() -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g", 5))
    h.queue.add(member("b", "g", 5))
    h.queue.add(pod("p", 3))
    h.queue.update(member("a", "g", 5), member("a", "g", 1))
    entity = h.queue.get_group(G)
    assert entity is not None and entity.priority == 1
    assert [h.pop().key, h.pop().key] == ["default/p", G]


# --- policy changes -----------------------------------------------------------------------------


def test_a_basic_group_turned_gang_gathers_its_queued_pods() -> None:
    h = harness(groups=groups_with(g=BASIC))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    h.groups.set("g", gang(2))
    h.queue.group_changed(ref("g"))
    assert h.queue.where_group(G) == "active" and h.members_of(G) == ["default/a", "default/b"]
    assert len(h.queue) == 1


def test_a_gang_turned_basic_releases_its_members_as_pods() -> None:
    h = harness(groups=groups_with(g=gang(3)))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    h.groups.set("g", BASIC)
    h.queue.group_changed(ref("g"))
    assert h.queue.where_group(G) is None
    assert sorted(e.key for e in h.queue.entities("active")) == ["default/a", "default/b"]


def test_a_gang_turned_basic_and_back_gathers_its_members_again() -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    h.groups.set("g", BASIC)
    h.queue.group_changed(ref("g"))
    h.groups.set("g", gang(2))
    h.queue.group_changed(ref("g"))
    assert h.queue.where_group(G) == "active" and h.members_of(G) == ["default/a", "default/b"]
    assert len(h.queue) == 1


def test_a_remainder_requeued_after_its_group_turned_basic_comes_back_as_pods() -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    entity = h.pop_group()
    h.groups.set("g", BASIC)
    h.queue.group_changed(ref("g"))
    assert h.fail_group(entity, entity.pod_keys(), rejected_by=[]) == "backoff"
    assert h.queue.where_group(G) is None
    pods = h.queue.entities("backoff")
    assert sorted(e.key for e in pods) == ["default/a", "default/b"]
    assert {(e.kind, e.attempts) for e in pods} == {("pod", 1)}


# --- identity, counts, timing ---------------------------------------------------------------------


def test_a_pod_and_a_group_with_the_same_key_are_queued_side_by_side() -> None:
    h = harness(groups=groups_with(g=gang(1)))
    h.queue.add(pod("g", priority=1))
    h.queue.add(member("a", "g"))
    assert (h.queue.where(G), h.queue.where_group(G), len(h.queue)) == ("active", "active", 2)
    first, second = h.pop(), h.pop()
    assert (first.kind, second.kind) == ("pod", "podgroup") and first.key == second.key == G
    h.queue.done(G, second)
    assert (h.queue.where(G), h.queue.where_group(G)) == ("in_flight", None)


def test_counts_count_pods_per_queue_and_entities_per_type() -> None:
    h = harness(groups=groups_with(g=gang(3), h=gang(2)))
    for p in (member("a", "g"), member("b", "g"), member("c", "h"), member("d", "h"), pod("p")):
        h.queue.add(p)
    h.queue.add(make_pod().name("q").scheduling_gates("wait").obj())
    assert h.queue.pending_counts() == {"active": 3, "backoff": 0, "unschedulable": 0, "gated": 3}
    counts = {k: n for k, n in h.queue.entity_counts().items() if n}
    assert counts == {
        ("active", "pod"): 1,
        ("active", "podgroup"): 1,
        ("gated", "pod"): 1,
        ("gated", "podgroup"): 1,
    }


def test_group_first_seen_is_when_the_queue_first_held_a_member_until_it_holds_none() -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.clock.advance(5)
    h.queue.add(member("b", "g"))
    assert h.queue.group_first_seen(G) == 1000.0
    entity = h.pop_group()
    assert h.queue.group_first_seen(G) == 1000.0
    h.queue.done(G, entity)
    assert h.queue.group_first_seen(G) is None


def test_a_popped_group_is_a_queued_group_info_with_its_members() -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g", 3))
    h.queue.add(member("b", "g", 7))
    entity = h.pop_group()
    assert isinstance(entity, QueuedGroupInfo)
    assert (entity.ref, entity.policy, entity.priority) == (ref("g"), gang(2), 3)
    assert sorted(entity.pod_keys()) == ["default/a", "default/b"]
    assert [p.metadata.name for p in entity.pods()] == ["a", "b"]
