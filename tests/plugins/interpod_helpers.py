"""Nodes, pods and runners shared by the InterPodAffinity tests."""

from __future__ import annotations

from collections.abc import Mapping

from troupe.api.cycle import CycleState
from troupe.api.framework import NamespaceLabels
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Node, Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code
from troupe.plugins.interpodaffinity import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    InterPodAffinity,
    InterPodAffinityArgs,
)

from tests.plugins.builders import PodBuilder, make_node, make_pod
from tests.plugins.fakes import FakeHandle

HOST = "kubernetes.io/hostname"
WEB = {"app": "web"}
DB = {"app": "db"}
REASONS = {
    ERR_REASON_AFFINITY_RULES_NOT_MATCH: ("affinity", Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: ("anti", Code.UNSCHEDULABLE),
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: ("existing", Code.UNSCHEDULABLE),
}


def node(name: str, zone: str | None = None, **labels: str) -> Node:
    b = make_node().name(name).label(HOST, name)
    if zone is not None:
        b.label("zone", zone)
    for k, v in labels.items():
        b.label(k, v)
    return b.obj()


def pod(name: str, labels: Mapping[str, str] = WEB) -> PodBuilder:
    return make_pod().name(name).labels(labels)


def plugin(
    args: InterPodAffinityArgs | None = None, namespaces: NamespaceLabels | None = None
) -> InterPodAffinity:
    return InterPodAffinity(args, FakeHandle(namespaces=namespaces))


def run_filter(
    pl: InterPodAffinity, incoming: Pod | PodInfo, table: NodeTable
) -> dict[str, str] | None:
    """Node name -> "ok" or the short reason; None when PreFilter skipped."""
    info = incoming if isinstance(incoming, PodInfo) else PodInfo.of(incoming)
    state = CycleState()
    _, status = pl.pre_filter(state, info, table)
    if status.is_skip:
        return None
    assert status.is_success
    result = pl.filter(state, info, table)
    verdict = {name: "ok" for name in table.index}
    for rejection in result.explain():
        short, code = REASONS[rejection.reason]
        assert rejection.code is code
        for name, slot in table.index.items():
            if rejection.nodes[slot]:
                assert verdict[name] == "ok", f"{name} got two reasons"
                verdict[name] = short
    for name, slot in table.index.items():
        assert bool(result.feasible[slot]) == (verdict[name] == "ok")
    return verdict


ZONES = [node("a1", "a"), node("a2", "a"), node("b1", "b")]
NAMES = ["a1", "a2", "b1"]
