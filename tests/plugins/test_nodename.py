"""NodeName: only the node named in spec.nodeName fits."""

from __future__ import annotations

import pytest
from troupe.api.events import QueueingHint
from troupe.api.objects import Node
from troupe.api.status import Code
from troupe.plugins.nodename import NodeName
from troupe.plugins.nodename.node_name import node_is_the_requested_one

from tests.plugins.builders import make_node, make_pod, table_of
from tests.plugins.fakes import FakeHandle, run_filter

REASON = "node(s) didn't match the requested node name"
NODES = [make_node().name(n).capacity(cpu="1", pods=10).obj() for n in ("n1", "n2")]


@pytest.mark.parametrize(
    ("wanted", "feasible"),
    [
        pytest.param("n1", {"n1"}, id="the named node fits and the others are rejected"),
        pytest.param("gone", set(), id="a name no node has rejects every node"),
    ],
)
def test_filter(wanted: str, feasible: set[str]) -> None:
    out = run_filter(NodeName(None, FakeHandle()), make_pod().node(wanted).obj(), table_of(NODES))
    assert out.feasible == feasible
    assert out.reasons == {n: [REASON] for n in {"n1", "n2"} - feasible}
    assert all(c == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE} for c in out.codes.values())


def test_a_pod_without_a_node_name_skips_the_filter() -> None:
    out = run_filter(NodeName(None, FakeHandle()), make_pod().obj(), table_of(NODES))
    assert out.status.is_skip and out.feasible == {"n1", "n2"}


@pytest.mark.parametrize(
    ("added", "hint"),
    [
        pytest.param(NODES[0], QueueingHint.QUEUE, id="the requested node appears"),
        pytest.param(NODES[1], QueueingHint.SKIP, id="another node appears"),
    ],
)
def test_node_added_hint(added: Node, hint: QueueingHint) -> None:
    assert node_is_the_requested_one(make_pod().node("n1").obj(), None, added) is hint
