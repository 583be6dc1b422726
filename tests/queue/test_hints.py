"""Queueing hints: which cluster events move which unschedulable or gated entities."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from troupe.api.events import (
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
    QueueingHintFn,
    Resource,
)
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status
from troupe.queue.hints import POD_SPEC_CHANGED, HintRegistry, pod_update_events

from tests.plugins.builders import PodBuilder, make_pod
from tests.queue.helpers import AFFINITY, FIT, GANG, POD_GROUP_ADD, harness, pod

NODE_TAINT_UPDATE = ClusterEvent(Resource.NODE, Action.UPDATE_NODE_TAINT, "NodeTaintChange")
NODE_ANY_UPDATE = ClusterEvent(Resource.NODE, Action.UPDATE)
ANYTHING = ClusterEvent(Resource.WILDCARD, Action.ALL)


def skip(_pod: Pod, _old: object | None, _new: object | None) -> QueueingHint:
    return QueueingHint.SKIP


def queue(_pod: Pod, _old: object | None, _new: object | None) -> QueueingHint:
    return QueueingHint.QUEUE


def boom(_pod: Pod, _old: object | None, _new: object | None) -> QueueingHint:
    raise RuntimeError("hint bug")


@pytest.mark.parametrize(
    ("registered_by", "registered", "hint", "incoming", "wait", "expected", "errors"),
    [
        pytest.param(
            FIT, NODE_ADD, None, NODE_ADD, 0, "backoff", 0,
            id="a plugin that registered NodeAdd moves its pod on NodeAdd (to backoff)",
        ),
        pytest.param(
            FIT, NODE_ADD, None, NODE_ADD, 2, "active", 0,
            id="a pod whose backoff is over moves straight to active",
        ),
        pytest.param(
            FIT, NODE_ADD, None, ASSIGNED_POD_DELETE, 0, "unschedulable", 0,
            id="a NodeAdd registration does not move the pod on AssignedPodDelete",
        ),
        pytest.param(
            FIT, NODE_ADD, skip, NODE_ADD, 0, "unschedulable", 0,
            id="a SKIP hint keeps the pod",
        ),
        pytest.param(
            FIT, NODE_ADD, queue, NODE_ADD, 0, "backoff", 0, id="a QUEUE hint moves the pod",
        ),
        pytest.param(
            FIT, NODE_ADD, boom, NODE_ADD, 0, "backoff", 1,
            id="a hint that raises counts as QUEUE and is reported",
        ),
        pytest.param(
            AFFINITY, NODE_ADD, None, NODE_ADD, 0, "unschedulable", 0,
            id="another plugin's registration does not move the pod",
        ),
        pytest.param(
            FIT, NODE_ANY_UPDATE, None, NODE_TAINT_UPDATE, 0, "backoff", 0,
            id="a registration for every node update covers a taint update",
        ),
        pytest.param(
            FIT, NODE_TAINT_UPDATE, None, NODE_ADD, 0, "unschedulable", 0,
            id="a taint-update registration does not cover a node add",
        ),
        pytest.param(
            FIT, ANYTHING, None, ASSIGNED_POD_DELETE, 0, "backoff", 0,
            id="a wildcard registration covers any event",
        ),
    ],
)  # fmt: skip
def test_event_moves_unschedulable_pod(
    registered_by: str,
    registered: ClusterEvent,
    hint: QueueingHintFn | None,
    incoming: ClusterEvent,
    wait: float,
    expected: str,
    errors: int,
) -> None:
    h = harness()
    h.register(registered_by, registered, hint=hint)
    h.add_and_fail(pod("p"), rejected_by=[FIT])
    h.clock.advance(wait)
    assert h.queue.on_event(incoming, None, None) == errors
    assert h.queue.where("default/p") == expected
    if expected != "unschedulable":
        assert h.arrivals[-1] == (expected, str(incoming))
    assert h.queue.hint_errors == errors


def test_hints_see_the_rejected_pod_and_the_changed_objects() -> None:
    seen: list[tuple[str, object, object]] = []

    def record(p: Pod, old: object | None, new: object | None) -> QueueingHint:
        seen.append((p.key, old, new))
        return QueueingHint.SKIP

    h = harness()
    h.register(FIT, NODE_ADD, hint=record)
    h.add_and_fail(pod("p"), rejected_by=[FIT])
    h.queue.on_event(NODE_ADD, None, "node-n1")
    assert seen == [("default/p", None, "node-n1")]


def test_only_pods_rejected_by_an_interested_plugin_are_asked() -> None:
    asked: list[str] = []

    def record(p: Pod, _old: object | None, _new: object | None) -> QueueingHint:
        asked.append(p.metadata.name)
        return QueueingHint.QUEUE

    h = harness()
    h.register(FIT, NODE_ADD, hint=record)
    h.add_and_fail(pod("fit"), rejected_by=[FIT])
    h.add_and_fail(pod("affinity"), rejected_by=[AFFINITY])
    h.queue.on_event(NODE_ADD, None, None)
    assert asked == ["fit"]
    assert h.queue.where("default/affinity") == "unschedulable"


def test_a_pending_plugin_queue_hint_skips_the_backoff() -> None:
    h = harness()
    h.register(GANG, POD_GROUP_ADD)
    h.add_and_fail(pod("p"), rejected_by=[FIT], pending=[GANG])
    h.queue.on_event(POD_GROUP_ADD, None, None)
    assert h.queue.where("default/p") == "active"


def test_a_wildcard_event_carrying_a_pod_moves_only_that_pod() -> None:
    h = harness()
    h.add_and_fail(pod("a"), rejected_by=[FIT])
    h.add_and_fail(pod("b"), rejected_by=[FIT])
    h.queue.on_event(ClusterEvent(Resource.WILDCARD, Action.ALL, "ForceActivate"), None, pod("a"))
    assert h.queue.where("default/a") == "backoff"
    assert h.queue.where("default/b") == "unschedulable"


def test_an_event_the_gating_plugin_registered_runs_pre_enqueue_again() -> None:
    groups: set[str] = set()

    def gang_gate(p: Pod) -> Status:
        if p.metadata.labels.get("group") in groups:
            return Status()
        return Status.unschedulable("group not found", plugin=GANG)

    h = harness(pre_enqueue=gang_gate)
    h.register(GANG, POD_GROUP_ADD)
    h.queue.add(make_pod().name("p").label("group", "g").obj())
    h.queue.on_event(POD_GROUP_ADD, None, None)
    assert h.queue.where("default/p") == "gated"
    groups.add("g")
    h.queue.on_event(NODE_ADD, None, None)
    assert h.queue.where("default/p") == "gated", "NodeAdd is not the gating plugin's event"
    h.queue.on_event(POD_GROUP_ADD, None, None)
    assert h.queue.where("default/p") == "active"
    assert h.arrivals == [("gated", "PodAdd"), ("active", "PodGroupAdd")]


# --- updates of pods in the unschedulable pool --------------------------------------------

LABEL_UPDATE = ClusterEvent(Resource.POD, Action.UPDATE_POD_LABEL)
ANY_POD_UPDATE = ClusterEvent(Resource.POD, Action.UPDATE)


@pytest.mark.parametrize(
    ("registered", "change", "expected"),
    [
        pytest.param(
            LABEL_UPDATE, lambda b: b.label("app", "web"), "backoff",
            id="a label change moves a pod whose plugin registered pod label updates",
        ),
        pytest.param(
            NODE_ADD, lambda b: b.label("app", "web"), "unschedulable",
            id="a label change keeps a pod whose plugin did not register it",
        ),
        pytest.param(
            NODE_ADD, lambda b: b.toleration("gpu"), "backoff",
            id="a spec change always requeues",
        ),
        pytest.param(
            NODE_ADD, lambda b: b.phase("Pending").nominated("n1"), "unschedulable",
            id="a status-only change keeps the pod",
        ),
        pytest.param(
            ANY_POD_UPDATE, lambda b: b.created("2025-01-01T00:00:00Z"), "backoff",
            id="another metadata change moves a plugin registered for every pod update",
        ),
    ],
)  # fmt: skip
def test_update_of_unschedulable_pod(
    registered: ClusterEvent, change: Callable[..., object], expected: str
) -> None:
    h = harness()
    h.register(FIT, registered)
    h.add_and_fail(pod("p"), rejected_by=[FIT])
    builder = make_pod().name("p").priority(0)
    change(builder)
    h.queue.update(pod("p"), builder.obj())
    assert h.queue.where("default/p") == expected


def _p() -> PodBuilder:
    return make_pod().name("p")


@pytest.mark.parametrize(
    ("old", "new", "actions"),
    [
        pytest.param(_p().req(cpu="2"), _p().req(cpu="2"), [], id="no change is no event"),
        pytest.param(_p(), _p().nominated("n1"), [], id="a status change is no event"),
        pytest.param(_p(), _p().label("a", "b"), [Action.UPDATE_POD_LABEL], id="labels"),
        pytest.param(
            _p().req(cpu="2"),
            _p().req(cpu="1"),
            [Action.UPDATE_POD_SCALE_DOWN, None],
            id="lower requests are a scale-down and a spec change",
        ),
        pytest.param(
            _p().req(cpu="2"),
            _p().req(cpu="4"),
            [Action.UPDATE_OTHER, None],
            id="higher requests are only a spec change",
        ),
        pytest.param(
            _p(), _p().toleration("gpu"), [Action.UPDATE_POD_TOLERATIONS, None], id="a toleration"
        ),
        pytest.param(
            _p().scheduling_gates("a"),
            _p(),
            [Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED, None],
            id="removing the last gate is GatesEliminated",
        ),
        pytest.param(_p(), _p().uid("other"), [Action.UPDATE_OTHER], id="other metadata"),
    ],
)
def test_pod_update_events(old: PodBuilder, new: PodBuilder, actions: list[Action | None]) -> None:
    before, after = old.obj(), new.obj()
    events = pod_update_events(
        before, after, PodInfo.of(before).requests, PodInfo.of(after).requests
    )
    assert [None if e == POD_SPEC_CHANGED else e.action for e in events] == actions


def test_the_registrations_an_event_matches_follow_later_registrations() -> None:
    """``matching`` caches its answer per event (by value and by identity); a plugin
    registered afterwards for the same event is matched from then on, whether the
    event is the same object or an equal one."""
    registry = HintRegistry()
    registry.register("A", [ClusterEventWithHint(NODE_ADD)])
    assert [plugin for plugin, _ in registry.matching(NODE_ADD)] == ["A"]
    assert registry.is_of_interest(NODE_ADD)
    registry.register("B", [ClusterEventWithHint(NODE_ADD)])
    assert [plugin for plugin, _ in registry.matching(NODE_ADD)] == ["A", "B"]
    equal = ClusterEvent(NODE_ADD.resource, NODE_ADD.action, NODE_ADD.label)
    assert [plugin for plugin, _ in registry.matching(equal)] == ["A", "B"]
    assert not registry.matching(ClusterEvent(Resource.POD, Action.DELETE))
