"""NodeUnschedulable: cordoned nodes take only pods tolerating the cordon."""

from __future__ import annotations

import pytest
from troupe.api.events import QueueingHint
from troupe.api.objects import Node, Pod
from troupe.api.status import Code
from troupe.plugins.nodeunschedulable import NodeUnschedulable
from troupe.plugins.nodeunschedulable.node_unschedulable import (
    node_became_schedulable,
    pod_now_tolerates_cordon,
)

from tests.plugins.builders import PodBuilder, make_node, make_pod, table_of
from tests.plugins.fakes import FakeHandle, run_filter

REASON = "node(s) were unschedulable"
CORDON_KEY = "node.kubernetes.io/unschedulable"


def node(name: str, cordoned: bool = False) -> Node:
    return make_node().name(name).capacity(cpu="1", pods=10).unschedulable(cordoned).obj()


@pytest.mark.parametrize(
    ("pod", "feasible"),
    [
        pytest.param(make_pod(), {"open"}, id="a cordoned node is rejected"),
        pytest.param(
            make_pod().toleration(CORDON_KEY, effect="NoSchedule"),
            {"open", "cordoned"},
            id="a pod tolerating the unschedulable taint may use it",
        ),
        pytest.param(
            make_pod().toleration(operator="Exists"),
            {"open", "cordoned"},
            id="tolerating everything",
        ),
        pytest.param(
            make_pod().toleration(CORDON_KEY, effect="NoExecute"),
            {"open"},
            id="a toleration for another effect does not help",
        ),
    ],
)
def test_filter(pod: PodBuilder, feasible: set[str]) -> None:
    table = table_of([node("open"), node("cordoned", cordoned=True)])
    out = run_filter(NodeUnschedulable(None, FakeHandle()), pod.obj(), table)
    assert out.feasible == feasible
    assert out.reasons == ({} if "cordoned" in feasible else {"cordoned": [REASON]})
    assert all(c == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE} for c in out.codes.values())


def test_no_cordoned_node_skips_the_filter() -> None:
    out = run_filter(NodeUnschedulable(None, FakeHandle()), make_pod().obj(), table_of([node("a")]))
    assert out.status.is_skip


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        pytest.param(None, node("n"), QueueingHint.QUEUE, id="a schedulable node is added"),
        pytest.param(None, node("n", True), QueueingHint.SKIP, id="a cordoned node is added"),
        pytest.param(node("n", True), node("n"), QueueingHint.QUEUE, id="a node is uncordoned"),
        pytest.param(node("n"), node("n"), QueueingHint.SKIP, id="an open node changes"),
    ],
)
def test_node_hint(old: Node | None, new: Node, hint: QueueingHint) -> None:
    assert node_became_schedulable(make_pod().obj(), old, new) is hint


ME = make_pod().uid("me")


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        pytest.param(
            ME.obj(),
            make_pod().uid("me").toleration(CORDON_KEY, effect="NoSchedule").obj(),
            QueueingHint.QUEUE,
            id="the pod gains the cordon toleration",
        ),
        pytest.param(
            make_pod().uid("other").obj(),
            make_pod().uid("other").toleration(CORDON_KEY).obj(),
            QueueingHint.SKIP,
            id="another pod gains it",
        ),
        pytest.param(
            ME.obj(),
            make_pod().uid("me").toleration("x").obj(),
            QueueingHint.SKIP,
            id="an unrelated one",
        ),
    ],
)
def test_pod_hint(old: Pod, new: Pod, hint: QueueingHint) -> None:
    assert pod_now_tolerates_cordon(ME.obj(), old, new) is hint
