"""InterPodAffinity queueing hints and registered events."""

from __future__ import annotations

import pytest
from troupe.api.events import Action, Resource
from troupe.api.objects import Node, Pod
from troupe.plugins.interpodaffinity.plugin import after_node_change

from tests.plugins.builders import PodBuilder
from tests.plugins.interpod_helpers import (
    DB,
    WEB,
    node,
    plugin,
    pod,
)

# --- queueing hints ----------------------------------------------------------------

AFFINE = pod("target", {"app": "x"}).pod_affinity("zone", DB).obj()
ANTI = pod("target", {"app": "x"}).pod_anti_affinity("zone", WEB).obj()
PLAIN = pod("target", {"app": "x"}).obj()


def placed(b: PodBuilder) -> Pod:
    return b.node("n1").obj()


@pytest.mark.parametrize(
    ("target", "old", "new", "queue"),
    [
        pytest.param(
            AFFINE, None, placed(pod("d", DB)), True, id="a pod matching the affinity placed queues"
        ),
        pytest.param(
            AFFINE, None, placed(pod("w")), False, id="a pod not matching the affinity placed skips"
        ),
        pytest.param(AFFINE, None, pod("d", DB).obj(), False, id="an unplaced pod skips"),
        pytest.param(
            ANTI, placed(pod("w")), None, True, id="a deleted pod the anti-affinity matched queues"
        ),
        pytest.param(ANTI, placed(pod("d", DB)), None, False, id="a deleted unrelated pod skips"),
        pytest.param(
            PLAIN,
            placed(pod("d", DB).pod_anti_affinity("zone", {"app": "x"})),
            None,
            True,
            id="a deleted pod whose anti-affinity matched the target queues",
        ),
        pytest.param(
            AFFINE,
            placed(pod("d", {"app": "y"})),
            placed(pod("d", DB)),
            True,
            id="a pod relabelled into the affinity queues",
        ),
        pytest.param(
            ANTI,
            placed(pod("w")),
            placed(pod("w", {"app": "y"})),
            True,
            id="a pod relabelled out of the anti-affinity queues",
        ),
        pytest.param(
            ANTI,
            placed(pod("w", {"app": "y"})),
            placed(pod("w")),
            False,
            id="a pod relabelled into the anti-affinity skips",
        ),
    ],
)
def test_pod_hint(target: Pod, old: Pod | None, new: Pod | None, queue: bool) -> None:
    assert (plugin().after_pod_change(target, old, new).name == "QUEUE") is queue


@pytest.mark.parametrize(
    ("target", "old", "new", "queue"),
    [
        pytest.param(
            AFFINE, None, node("n", "a"), True, id="a node with the affinity key added queues"
        ),
        pytest.param(
            AFFINE, None, node("n"), False, id="a node without the affinity key added skips"
        ),
        pytest.param(
            AFFINE, node("n", "a"), node("n", "b"), True, id="a changed affinity key value queues"
        ),
        pytest.param(
            AFFINE,
            node("n", "a"),
            node("n", "a", x="y"),
            False,
            id="an unrelated label change skips",
        ),
        pytest.param(ANTI, None, node("n"), True, id="any node added queues an anti-affine pod"),
        pytest.param(
            ANTI, node("n", "a"), node("n"), True, id="losing the anti-affinity key queues"
        ),
        pytest.param(
            ANTI, node("n"), node("n", "a"), False, id="gaining the anti-affinity key skips"
        ),
        pytest.param(
            PLAIN,
            None,
            node("n"),
            True,
            id="a node added queues a pod held off by existing anti-affinity",
        ),
    ],
)
def test_node_hint(target: Pod, old: Node | None, new: Node | None, queue: bool) -> None:
    assert (after_node_change(target, old, new).name == "QUEUE") is queue


def test_registered_events() -> None:
    events = {(e.event.resource, e.event.action) for e in plugin().events_to_register()}
    assert events == {
        (Resource.ASSIGNED_POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE),
        (Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL),
        (Resource.NAMESPACE, Action.ADD | Action.UPDATE_NAMESPACE_LABEL | Action.DELETE),
    }
