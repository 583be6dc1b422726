"""Where an entity lands after each queue operation, case by case."""

from __future__ import annotations

import pytest
from troupe.api.events import ASSIGNED_POD_ADD, NODE_ADD, ClusterEvent
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status

from tests.plugins.builders import make_pod
from tests.queue.helpers import AFFINITY, FIT, GANG, GATES, POD_GROUP_ADD, harness, pod

# --- add --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("new_pod", "queue", "gate"),
    [
        pytest.param(pod("p"), "active", "", id="a plain pod goes to active"),
        pytest.param(
            make_pod().name("p").scheduling_gates("wait").obj(),
            "gated",
            GATES,
            id="a pod with scheduling gates is gated by SchedulingGates",
        ),
    ],
)
def test_add(new_pod: Pod, queue: str, gate: str) -> None:
    h = harness()
    h.queue.add(new_pod)
    assert h.queue.where("default/p") == queue
    entity = h.queue.get("default/p")
    assert entity is not None and entity.gating_plugin == gate
    assert h.arrivals == [(queue, "PodAdd")]


def test_a_refusal_without_a_plugin_name_is_gated_under_pre_enqueue() -> None:
    h = harness(pre_enqueue=lambda p: Status.unschedulable("no"))
    h.queue.add(pod("p"))
    entity = h.queue.get("default/p")
    assert entity is not None and entity.gating_plugin == "PreEnqueue"
    assert h.queue.pending_counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 1}


def test_adding_a_known_pod_again_updates_it_instead_of_duplicating() -> None:
    h = harness()
    h.queue.add(pod("p", priority=1))
    h.queue.add(pod("p", priority=5))
    assert len(h.queue) == 1
    entity = h.queue.get("default/p")
    assert entity is not None and entity.priority == 5


def test_a_pod_entity_records_its_first_entry_into_active() -> None:
    h = harness()
    h.queue.add(make_pod().name("p").scheduling_gates("wait").obj())
    h.clock.advance(7)
    h.queue.update(make_pod().name("p").scheduling_gates("wait").obj(), pod("p"))
    entity = h.queue.get("default/p")
    assert entity is not None
    assert entity.timestamp == 1000.0
    assert entity.initial_attempt_timestamp == 1007.0


# --- failed attempts ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rejected_by", "pending", "event_in_flight", "queue"),
    [
        pytest.param(
            {FIT}, set(), None, "unschedulable", id="a rejection with no event in flight waits"
        ),
        pytest.param(set(), set(), None, "backoff", id="an error (no rejecting plugin) backs off"),
        pytest.param(
            {FIT},
            set(),
            NODE_ADD,
            "backoff",
            id="an event the rejecting plugin registered, seen in flight, means backoff",
        ),
        pytest.param(
            {FIT},
            set(),
            ASSIGNED_POD_ADD,
            "unschedulable",
            id="an event only another plugin registered, seen in flight, is ignored",
        ),
        pytest.param(
            set(),
            {GANG},
            POD_GROUP_ADD,
            "active",
            id="a pending plugin's event seen in flight skips backoff",
        ),
        pytest.param(set(), {GANG}, None, "unschedulable", id="a pending rejection waits"),
    ],
)
def test_failed_attempt(
    rejected_by: set[str], pending: set[str], event_in_flight: ClusterEvent | None, queue: str
) -> None:
    h = harness()
    h.register(FIT, NODE_ADD)
    h.register(AFFINITY, ASSIGNED_POD_ADD)
    h.register(GANG, POD_GROUP_ADD)
    h.queue.add(pod("p"))
    entity = h.pop()
    assert h.queue.where("default/p") == "in_flight"
    if event_in_flight is not None:
        h.queue.on_event(event_in_flight, None, None)
    assert h.fail(entity, rejected_by, pending) == queue
    assert h.queue.where("default/p") == queue
    assert h.arrivals[-1] == (queue, "ScheduleAttemptFailure")
    assert h.queue.in_flight() == []


def test_an_event_before_the_pop_does_not_count_as_seen_in_flight() -> None:
    h = harness()
    h.register(FIT, NODE_ADD)
    h.queue.add(pod("a"))
    h.queue.add(pod("b"))
    a = h.pop()
    h.queue.on_event(NODE_ADD, None, None)  # while a is in flight, before b's pop
    b = h.pop()
    assert h.fail(b, [FIT]) == "unschedulable"
    assert h.fail(a, [FIT]) == "backoff"


def test_a_pod_deleted_during_its_attempt_is_dropped() -> None:
    h = harness()
    h.queue.add(pod("p"))
    entity = h.pop()
    h.queue.delete(pod("p"))
    assert h.queue.where("default/p") is None
    assert h.fail(entity, [FIT]) is None
    assert len(h.queue) == 0 and h.queue.in_flight() == []


def test_a_pod_recreated_during_the_old_attempt_keeps_only_the_new_entity() -> None:
    h = harness()
    h.queue.add(pod("p"))
    old = h.pop()
    h.queue.delete(pod("p"))
    h.queue.add(pod("p"))
    new = h.pop()
    assert h.fail(old, [FIT]) is None
    assert h.queue.where("default/p") == "in_flight"
    assert h.fail(new, [FIT]) == "unschedulable"


def test_a_failed_attempt_requeues_the_newest_version_seen_in_flight() -> None:
    h = harness()
    h.queue.add(pod("p"))
    entity = h.pop()
    h.queue.update(pod("p"), make_pod().name("p").label("team", "a").obj())
    h.fail(entity, [FIT])
    stored = h.queue.get("default/p")
    assert stored is not None and stored.pods()[0].metadata.labels == {"team": "a"}


def test_a_spec_change_in_flight_requeues_after_backoff() -> None:
    h = harness()
    h.queue.add(pod("p"))
    entity = h.pop()
    h.queue.update(pod("p"), make_pod().name("p").toleration("gpu").obj())
    assert h.fail(entity, [FIT]) == "backoff"


def test_an_entity_already_queued_is_not_added_twice() -> None:
    h = harness()
    h.queue.add(pod("p"))
    entity = h.pop()
    h.queue.add(pod("q"))
    h.queue.done(entity.key)
    h.queue.add(pod("p"))
    assert h.fail(entity, [FIT]) is None
    assert h.queue.pending_counts()["active"] == 2


# --- pop -------------------------------------------------------------------------------------


def test_pop_counts_cycles_and_attempts_and_clears_the_last_rejection() -> None:
    h = harness()
    entity = h.add_and_fail(pod("p"), rejected_by=[FIT])
    assert (h.queue.scheduling_cycle, entity.attempts) == (1, 1)
    h.queue.activate(["default/p"])
    again = h.pop()
    assert again is entity
    assert (h.queue.scheduling_cycle, entity.attempts) == (2, 2)
    assert entity.unschedulable_plugins == set()


# --- update ----------------------------------------------------------------------------------


def test_an_active_pod_update_takes_the_new_pod_and_resorts() -> None:
    h = harness()
    h.queue.add(pod("a", priority=5))
    h.queue.add(pod("b", priority=1))
    h.queue.update(pod("b", priority=1), pod("b", priority=9))
    assert h.pop().key == "default/b"


def test_a_backoff_pod_update_takes_the_new_pod_and_stays() -> None:
    h = harness()
    h.add_and_fail(pod("p"), rejected_by=[])
    h.queue.update(pod("p"), make_pod().name("p").label("x", "y").obj())
    assert h.queue.where("default/p") == "backoff"
    entity = h.queue.get("default/p")
    assert entity is not None and entity.pods()[0].metadata.labels == {"x": "y"}


def test_an_update_that_binds_the_pod_removes_it() -> None:
    h = harness()
    h.queue.add(pod("p"))
    h.queue.update(pod("p"), make_pod().name("p").node("n1").obj())
    assert "default/p" not in h.queue


def test_an_update_of_an_unknown_pod_adds_it() -> None:
    h = harness()
    h.queue.update(pod("p"), pod("p"))
    assert h.queue.where("default/p") == "active"


@pytest.mark.parametrize(
    ("gates_after", "queue"),
    [
        pytest.param((), "active", id="removing every scheduling gate releases the pod"),
        pytest.param(("b",), "gated", id="removing one of two gates keeps it gated"),
    ],
)
def test_gated_pod_update(gates_after: tuple[str, ...], queue: str) -> None:
    h = harness()
    before = make_pod().name("p").scheduling_gates("a", "b").obj()
    h.queue.add(before)
    h.queue.update(before, make_pod().name("p").scheduling_gates(*gates_after).obj())
    assert h.queue.where("default/p") == queue


# --- delete ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    ["active", "backoff", "unschedulable", "gated", "in_flight"],
    ids=lambda w: f"a pod deleted from {w} is gone",
)
def test_delete(where: str) -> None:
    h = harness()
    p = pod("p")
    if where == "gated":
        p = make_pod().name("p").scheduling_gates("g").obj()
    h.queue.add(p)
    if where in ("backoff", "unschedulable", "in_flight"):
        entity = h.pop()
        if where != "in_flight":
            h.fail(entity, [FIT] if where == "unschedulable" else [])
    h.queue.add_nominated(PodInfo.of(p), "n1")
    assert h.queue.where("default/p") == where
    h.queue.delete(p)
    assert h.queue.where("default/p") is None
    assert "default/p" not in h.queue
    assert h.queue.nominated_node("default/p") is None


# --- activate and move-all --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rejected_by", "before"),
    [
        pytest.param([FIT], "unschedulable", id="activate takes an unschedulable pod to active"),
        pytest.param([], "backoff", id="activate takes a backing-off pod to active"),
    ],
)
def test_activate(rejected_by: list[str], before: str) -> None:
    h = harness()
    h.add_and_fail(pod("p"), rejected_by=rejected_by)
    assert h.queue.where("default/p") == before
    h.queue.activate(["default/p", "default/unknown"])
    assert h.queue.where("default/p") == "active"
    assert h.arrivals[-1] == ("active", "ForceActivate")


def test_activating_a_pod_in_flight_retries_it_when_its_attempt_fails() -> None:
    h = harness()
    h.queue.add(pod("p"))
    entity = h.pop()
    h.queue.activate(["default/p"])
    assert h.fail(entity, [FIT]) == "backoff"


def test_activating_a_gated_pod_runs_pre_enqueue_again() -> None:
    allowed: set[str] = set()
    h = harness(
        pre_enqueue=lambda p: Status() if p.key in allowed else Status.unschedulable(plugin=GANG)
    )
    h.queue.add(pod("p"))
    h.queue.activate(["default/p"])
    assert h.queue.where("default/p") == "gated"
    allowed.add("default/p")
    h.queue.activate(["default/p"])
    assert h.queue.where("default/p") == "active"


def test_move_all_retries_every_unschedulable_pod_after_its_backoff() -> None:
    h = harness()
    h.add_and_fail(pod("a"), rejected_by=[FIT])
    h.add_and_fail(pod("b"), rejected_by=[AFFINITY])
    h.clock.advance(5)  # both backoffs (1 s) are over
    h.add_and_fail(pod("c"), rejected_by=[FIT])
    h.queue.move_all_to_active_or_backoff()
    assert [h.queue.where(k) for k in ("default/a", "default/b", "default/c")] == [
        "active",
        "active",
        "backoff",
    ]
