"""Nodes, pods and runners shared by the PodTopologySpread tests."""

from __future__ import annotations

from troupe.api.cycle import CycleState
from troupe.api.nodetable import NodeTable
from troupe.api.objects import (
    Node,
    Pod,
)
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code
from troupe.plugins.podtopologyspread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    PodTopologySpread,
    PodTopologySpreadArgs,
)

from tests.plugins.builders import PodBuilder, make_node, make_pod
from tests.plugins.fakes import FakeHandle

HOST = "kubernetes.io/hostname"
WEB = {"app": "web"}


def node(name: str, zone: str | None = None, **labels: str) -> Node:
    b = make_node().name(name).label(HOST, name)
    if zone is not None:
        b.label("zone", zone)
    for k, v in labels.items():
        b.label(k, v)
    return b.obj()


def web(name: str, **labels: str) -> PodBuilder:
    return make_pod().name(name).labels(WEB).labels(labels)


def webs(prefix: str, n: int) -> list[Pod]:
    return [web(f"{prefix}{i}").obj() for i in range(n)]


def plugin(args: PodTopologySpreadArgs | None = None) -> PodTopologySpread:
    return PodTopologySpread(args, FakeHandle())


def run_filter(pl: PodTopologySpread, pod: Pod, table: NodeTable) -> dict[str, str]:
    """Node name -> "ok", "skew" (Unschedulable) or "label" (Unresolvable)."""
    info = PodInfo.of(pod)
    state = CycleState()
    _, status = pl.pre_filter(state, info, table)
    assert status.is_success
    result = pl.filter(state, info, table)
    verdict = {name: "ok" for name in table.index}
    for rejection in result.explain():
        kind = {
            ERR_REASON_CONSTRAINTS_NOT_MATCH: ("skew", Code.UNSCHEDULABLE),
            ERR_REASON_NODE_LABEL_NOT_MATCH: ("label", Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
        }[rejection.reason]
        assert rejection.code is kind[1]
        for name, slot in table.index.items():
            if rejection.nodes[slot]:
                assert verdict[name] == "ok", f"{name} got two reasons"
                verdict[name] = kind[0]
    for name, slot in table.index.items():
        assert bool(result.feasible[slot]) == (verdict[name] == "ok")
    return verdict


def spread(pod: PodBuilder, max_skew: int = 1, key: str = "zone", **kw: object) -> Pod:
    return pod.spread_constraint(max_skew, key, WEB, **kw).obj()  # type: ignore[arg-type]
