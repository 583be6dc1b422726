"""Nominated pods: which pods preemption promised a node to."""

from __future__ import annotations

import pytest
from troupe.api.podinfo import PodInfo
from troupe.queue.nominator import Nominator

from tests.plugins.builders import PodBuilder, make_pod
from tests.queue.helpers import harness


def _p(name: str = "p") -> PodBuilder:
    return make_pod().name(name)


def test_a_nominated_pod_is_listed_on_its_node_in_nomination_order() -> None:
    n = Nominator()
    n.add(_p("a").info(), "n1")
    n.add(_p("b").info(), "n1")
    n.add(_p("c").info(), "n2")
    assert [i.key for i in n.pods_for_node("n1")] == ["default/a", "default/b"]
    assert n.node_of("default/c") == "n2"
    assert n.pods_for_node("n3") == []


@pytest.mark.parametrize(
    ("second", "node", "listed_on_n1", "listed_on_n2"),
    [
        pytest.param(_p(), "n2", [], ["default/p"], id="renominating moves the pod"),
        pytest.param(_p(), "", [], [], id="an empty node name removes the nomination"),
        pytest.param(_p().node("n2"), "n2", [], [], id="a bound pod is never nominated"),
    ],
)
def test_renomination(
    second: PodBuilder, node: str, listed_on_n1: list[str], listed_on_n2: list[str]
) -> None:
    n = Nominator()
    n.add(_p().info(), "n1")
    n.add(second.info(), node)
    assert [i.key for i in n.pods_for_node("n1")] == listed_on_n1
    assert [i.key for i in n.pods_for_node("n2")] == listed_on_n2
    assert len(n) == len(listed_on_n1) + len(listed_on_n2)


@pytest.mark.parametrize(
    ("old", "new", "node"),
    [
        pytest.param(
            _p(), _p().label("x", "y"), "n1",
            id="an update without nominatedNodeName keeps our nomination",
        ),
        pytest.param(
            _p().nominated("n1"), _p(), None,
            id="an update clearing nominatedNodeName drops the nomination",
        ),
        pytest.param(
            _p(), _p().nominated("n2"), "n2", id="an update setting nominatedNodeName adopts it",
        ),
    ],
)  # fmt: skip
def test_update(old: PodBuilder, new: PodBuilder, node: str | None) -> None:
    n = Nominator()
    n.add(_p().info(), "n1")
    new_info = new.info()
    n.update(old.obj(), new_info)
    assert n.node_of("default/p") == node
    if node is not None:
        assert n.pods_for_node(node) == [new_info]


def test_the_queue_nominates_a_pod_that_arrives_with_nominated_node_name() -> None:
    h = harness()
    h.queue.add(_p().nominated("n1").obj())
    assert h.queue.nominated_node("default/p") == "n1"
    assert [i.key for i in h.queue.nominated_pods_for_node("n1")] == ["default/p"]


def test_the_queue_nominator_api() -> None:
    h = harness()
    info = PodInfo.of(_p().obj())
    h.queue.add_nominated(info, "n1")
    assert h.queue.nominated_pods_for_node("n1") == [info]
    h.queue.delete_nominated("default/p")
    assert h.queue.nominated_node("default/p") is None
