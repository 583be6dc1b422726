"""Pod groups after an attempt: remainders, backoff, hints, member updates, hand-back edges."""

from __future__ import annotations

import pytest
from troupe.api.events import ASSIGNED_POD_DELETE, NODE_ADD, QueueingHint
from troupe.api.gangs import GangPolicy
from troupe.api.objects import Pod

from tests.plugins.builders import make_pod
from tests.queue.helpers import (
    AFFINITY,
    FIT,
    gang,
    groups_with,
    harness,
    member,
    ref,
)

G = "default/g"


# --- after an attempt -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("remaining", "rejected_by", "where", "left"),
    [
        pytest.param(["default/b"], [FIT], "unschedulable", ["default/b"],
                     id="members that did not fit wait in the unschedulable pool"),
        pytest.param(["default/b"], [], "backoff", ["default/b"],
                     id="after an error the remainder backs off"),
        pytest.param(["default/a", "default/b"], [FIT], "unschedulable", ["default/a", "default/b"],
                     id="a group rejected whole comes back whole"),
        pytest.param([], [FIT], None, None, id="nothing comes back when every member was placed"),
    ],
)  # fmt: skip
def test_requeue_group_remainder(
    remaining: list[str], rejected_by: list[str], where: str | None, left: list[str] | None
) -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    entity = h.pop_group()
    h.groups.placed[ref("g").key] = 2 - len(remaining)  # the scheduler assumed the others
    assert h.fail_group(entity, remaining, rejected_by) == where
    assert h.queue.where_group(G) == where
    assert (h.members_of(G) if left is not None else None) == left
    assert h.queue.in_flight() == []
    if where is not None:
        assert entity.attempts == 1 and entity.backoff_expiry == h.clock.now() + 1.0


def test_add_unschedulable_if_not_present_hands_a_group_back_whole() -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    entity = h.pop_group()
    assert h.fail(entity, rejected_by=[FIT]) == "unschedulable"
    assert h.members_of(G) == ["default/a", "default/b"]
    assert h.arrivals[-1] == ("unschedulable", "ScheduleAttemptFailure")


def test_members_arriving_during_a_failed_attempt_join_the_remainder_and_are_tried_soon() -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    entity = h.pop_group()
    h.queue.add(member("c", "g"))
    h.groups.placed[ref("g").key] = 1
    assert h.fail_group(entity, ["default/b"]) == "backoff"
    assert h.members_of(G) == ["default/b", "default/c"]
    assert h.queue.get_group(G) is entity


def test_a_member_deleted_or_updated_during_the_attempt_comes_back_as_it_is_now() -> None:
    h = harness(groups=groups_with(g=gang(2)))
    for name in ("a", "b", "c"):
        h.queue.add(member(name, "g"))
    entity = h.pop_group()
    h.queue.delete(member("a", "g"))
    newer = make_pod().name("b").label("scheduling.x-k8s.io/pod-group", "g").label("v", "2").obj()
    h.queue.update(member("b", "g"), newer)
    h.fail_group(entity, ["default/a", "default/b", "default/c"])
    assert h.members_of(G) == ["default/b", "default/c"]
    assert entity.members["default/b"].pod == newer


def test_a_group_backoff_doubles_with_each_failed_attempt() -> None:
    h = harness(groups=groups_with(g=gang(1)))
    h.queue.add(member("a", "g"))
    expiries = []
    for _ in range(3):
        entity = h.pop_group()
        h.fail_group(entity, [entity.pod_keys()[0]], rejected_by=[])
        expiries.append(entity.backoff_expiry - h.clock.now())
        h.clock.advance(20)
        h.queue.flush_backoff_completed()
    assert expiries == [1.0, 2.0, 4.0]


# --- queueing hints and pod updates -----------------------------------------------------------


def _skip_labelled(p: Pod, _old: object | None, _new: object | None) -> QueueingHint:
    return QueueingHint.SKIP if p.metadata.labels.get("hint") == "skip" else QueueingHint.QUEUE


@pytest.mark.parametrize(
    ("hints", "where"),
    [
        pytest.param(["skip", "skip"], "unschedulable",
                     id="no member's hint says QUEUE: the group keeps waiting"),
        pytest.param(["skip", "queue"], "backoff", id="one member's QUEUE retries the whole group"),
    ],
)  # fmt: skip
def test_an_event_moves_a_rejected_group_when_any_member_hint_says_queue(
    hints: list[str], where: str
) -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.register(AFFINITY, ASSIGNED_POD_DELETE, hint=_skip_labelled)
    for name, hint in zip(("a", "b"), hints, strict=True):
        h.queue.add(
            make_pod()
            .name(name)
            .label("scheduling.x-k8s.io/pod-group", "g")
            .label("hint", hint)
            .obj()
        )
    entity = h.pop_group()
    h.fail_group(entity, entity.pod_keys(), rejected_by=[AFFINITY])
    h.queue.on_event(ASSIGNED_POD_DELETE, None, None)
    assert h.queue.where_group(G) == where


@pytest.mark.parametrize(
    ("change", "where"),
    [
        pytest.param("toleration", "backoff", id="a member's spec change retries its group"),
        pytest.param("status", "unschedulable", id="a member's status change does not"),
    ],
)
def test_a_member_update_of_a_rejected_group(change: str, where: str) -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    entity = h.pop_group()
    h.fail_group(entity, entity.pod_keys())
    new = member("a", "g")
    if change == "toleration":
        new.spec.tolerations = make_pod().toleration("x").obj().spec.tolerations
    else:
        new.status.nominated_node_name = "n1"
    h.queue.update(member("a", "g"), new)
    assert h.queue.where_group(G) == where
    assert h.queue.get("default/a") is entity and entity.members["default/a"].pod == new


def test_deleting_the_last_member_removes_the_group() -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.queue.delete(member("a", "g"))
    assert (h.queue.where_group(G), h.queue.group_first_seen(G), len(h.queue)) == (None, None, 0)


def test_a_member_relabelled_to_another_group_moves_there() -> None:
    h = harness(groups=groups_with(g=gang(2), h=gang(2)))
    for p in (member("a", "g"), member("b", "g"), member("c", "h")):
        h.queue.add(p)
    h.queue.update(member("a", "g"), member("a", "h"))
    assert (h.queue.where_group(G), h.queue.where_group("default/h")) == ("gated", "active")
    assert h.members_of("default/h") == ["default/a", "default/c"]


# --- edges of the attempt protocol ------------------------------------------------------------


def test_a_group_handed_back_twice_is_queued_once() -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    entity = h.pop_group()
    assert h.fail_group(entity, entity.pod_keys()) == "unschedulable"
    assert h.fail_group(entity, entity.pod_keys()) is None
    assert (len(h.queue), h.queue.pending_counts()["unschedulable"]) == (1, 2)


def test_members_handed_back_after_done_return_to_the_queue() -> None:
    """A binding that fails after the cycle ended: the scheduler hands the members back."""
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    entity = h.pop_group()
    h.groups.placed[ref("g").key] = 2
    h.queue.done(G, entity)
    assert h.queue.where("default/a") is None
    h.groups.placed[ref("g").key] = 0
    assert h.fail_group(entity, entity.pod_keys(), rejected_by=[]) == "backoff"
    assert h.members_of(G) == ["default/a", "default/b"]


def test_an_event_seen_while_the_group_was_in_flight_sends_it_to_backoff() -> None:
    h = harness(groups=groups_with(g=gang(1)))
    h.register(FIT, NODE_ADD)
    h.queue.add(member("a", "g"))
    entity = h.pop_group()
    h.queue.on_event(NODE_ADD, None, None)
    assert h.fail_group(entity, entity.pod_keys(), rejected_by=[FIT]) == "backoff"


def test_a_member_joining_a_rejected_group_retries_it_after_backoff() -> None:
    h = harness(groups=groups_with(g=gang(1)))
    h.queue.add(member("a", "g"))
    entity = h.pop_group()
    h.fail_group(entity, entity.pod_keys())
    assert h.queue.where_group(G) == "unschedulable"
    h.queue.add(member("b", "g"))
    assert h.queue.where_group(G) == "backoff" and h.members_of(G) == ["default/a", "default/b"]


@pytest.mark.parametrize(
    ("fail", "where"),
    [
        pytest.param(True, "active", id="activating a member moves its rejected group to active"),
        pytest.param(False, "backoff",
                     id="activating a member in flight retries its group when the attempt fails"),
    ],
)  # fmt: skip
def test_activate_a_member(fail: bool, where: str) -> None:
    h = harness(groups=groups_with(g=gang(1)))
    h.queue.add(member("a", "g"))
    entity = h.pop_group()
    if fail:
        h.fail_group(entity, entity.pod_keys())
    h.queue.activate(["default/a"])
    if not fail:
        h.fail_group(entity, entity.pod_keys())
    assert h.queue.where_group(G) == where


@pytest.mark.parametrize(
    ("policy", "where"),
    [
        pytest.param(gang(1), "backoff", id="a rejected group is retried when its policy changes"),
        pytest.param(gang(2), "unschedulable",
                     id="a rejected group keeps waiting when only the group's status changed"),
    ],
)  # fmt: skip
def test_group_changed_on_a_rejected_group(policy: GangPolicy, where: str) -> None:
    h = harness(groups=groups_with(g=gang(2)))
    h.queue.add(member("a", "g"))
    h.queue.add(member("b", "g"))
    entity = h.pop_group()
    h.fail_group(entity, entity.pod_keys())
    h.groups.set("g", policy)
    h.queue.group_changed(ref("g"))
    assert h.queue.where_group(G) == where
