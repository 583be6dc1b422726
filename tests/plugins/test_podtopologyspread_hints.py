"""PodTopologySpread queueing hints and registered events."""

from __future__ import annotations

import pytest
from troupe.api.events import Action, Resource
from troupe.api.objects import (
    Node,
    Pod,
)

from tests.plugins.builders import PodBuilder, make_node, make_pod
from tests.plugins.spread_helpers import (
    HOST,
    WEB,
    node,
    plugin,
    spread,
    web,
)

# --- queueing hints ----------------------------------------------------------------

TARGET = spread(web("target"))


def placed(pod: PodBuilder) -> Pod:
    return pod.node("n1").obj()


@pytest.mark.parametrize(
    ("old", "new", "queue"),
    [
        pytest.param(None, placed(web("w")), True, id="a matching pod placed queues"),
        pytest.param(
            None,
            placed(make_pod().name("d").label("app", "db")),
            False,
            id="a non-matching pod placed skips",
        ),
        pytest.param(None, web("w").obj(), False, id="an unplaced pod skips"),
        pytest.param(
            None, placed(web("w").namespace("other")), False, id="a pod of another namespace skips"
        ),
        pytest.param(placed(web("w")), None, True, id="a matching pod deleted queues"),
        pytest.param(
            placed(web("w")),
            placed(web("w").label("app", "db")),
            True,
            id="a pod relabelled out of the selector queues",
        ),
        pytest.param(
            placed(web("w")),
            placed(web("w").label("extra", "x")),
            False,
            id="a label change that keeps the match skips",
        ),
        pytest.param(
            placed(web("w")), placed(web("w")), False, id="an update without label change skips"
        ),
    ],
)
def test_pod_hint(old: Pod | None, new: Pod | None, queue: bool) -> None:
    hint = plugin().after_pod_change(TARGET, old, new)
    assert (hint.name == "QUEUE") is queue


def test_pod_hint_queues_on_own_new_toleration_with_taints_honored() -> None:
    target = spread(web("target"), node_taints_policy="Honor")
    updated = web("target").spread_constraint(1, "zone", WEB, node_taints_policy="Honor")
    hint = plugin().after_pod_change(target, target, updated.toleration("t").obj())
    assert hint.name == "QUEUE"


@pytest.mark.parametrize(
    ("old", "new", "queue"),
    [
        pytest.param(None, node("n", "a"), True, id="a node with the topology key added queues"),
        pytest.param(None, node("n"), False, id="a node without the topology key added skips"),
        pytest.param(node("n", "a"), None, True, id="a node with the key deleted queues"),
        pytest.param(node("n", "a"), node("n", "b"), True, id="a zone change queues"),
        pytest.param(node("n"), node("n", "a"), True, id="gaining the key queues"),
        pytest.param(
            node("n", "a"), node("n", "a", x="y"), False, id="an unrelated label change skips"
        ),
        pytest.param(
            node("n", "a"),
            make_node().name("n").label(HOST, "n").label("zone", "a").taint("t").obj(),
            True,
            id="a taint change on a node with the key queues",
        ),
    ],
)
def test_node_hint(old: Node | None, new: Node | None, queue: bool) -> None:
    hint = plugin().after_node_change(TARGET, old, new)
    assert (hint.name == "QUEUE") is queue


def test_registered_events() -> None:
    events = {(e.event.resource, e.event.action) for e in plugin().events_to_register()}
    assert events == {
        (Resource.ASSIGNED_POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE),
        (Resource.POD, Action.UPDATE_POD_TOLERATIONS),
        (
            Resource.NODE,
            Action.ADD | Action.DELETE | Action.UPDATE_NODE_LABEL | Action.UPDATE_NODE_TAINT,
        ),
    }
