"""PreFilter results that restrict the node set: the diagnosis and the requeue.

Nodes a PreFilter result leaves out count in the FitError as
``node(s) didn't satisfy plugin(s) [<plugins>]`` (upstream findNodesThatFitPod),
and the restricting plugins are the pod's rejectors, so a node event releases it
through their queueing hints instead of a blind backoff.
"""

from __future__ import annotations

from troupe.api.cycle import CycleState
from troupe.api.framework import PreFilterResult
from troupe.api.nodetable import NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.status import SUCCESS, Status
from troupe.plugins.registry import PluginSpec, default_registry
from troupe.queue.entity import QueuedPodInfo

from tests.plugins.builders import make_node, make_pod
from tests.scheduler.harness import Harness


def node(name: str, cpu: str = "4"):
    return make_node().name(name).capacity(cpu=cpu, memory="8Gi", pods=110)


def pinned_to(*names: str):
    """A pod whose required node affinity names nodes by metadata.name."""
    return (
        make_pod()
        .name("p")
        .req(cpu="1")
        .scheduler_name("troupe-scheduler")
        .node_affinity_term(fields=[("metadata.name", "In", names)])
    )


def queued(h: Harness, key: str) -> QueuedPodInfo:
    """The queued entity of ``key``, wherever it waits."""
    queue = h.scheduler.queue
    for name in ("unschedulable", "backoff", "active"):
        for entity in queue.entities(name):
            if entity.key == key and isinstance(entity, QueuedPodInfo):
                return entity
    raise AssertionError(f"{key} is not queued")


async def test_a_pod_pinned_to_a_missing_node_is_told_why_and_waits_for_a_node() -> None:
    h = Harness().nodes([node("n1").obj(), node("n2").obj(), node("n3").obj()])
    h.pods([pinned_to("ghost").obj()])
    await h.settle()
    assert h.client.bindings == []
    assert h.client.conditions["default/p"].message == (
        "0/3 nodes are available: 3 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    # Waits for a node event (NodeAffinity's hints), not a timed backoff retry.
    assert h.scheduler.queue.pending_counts()["unschedulable"] == 1
    assert queued(h, "default/p").unschedulable_plugins == {"NodeAffinity"}
    h.handlers.on_node_add(node("ghost").obj())
    await h.advance(10)
    await h.settle()
    assert h.client.node_of("default/p") == "ghost"
    await h.close()


async def test_nodes_left_out_by_prefilter_are_counted_beside_filter_reasons() -> None:
    h = Harness().nodes([node("n1", cpu="1").obj(), node("n2").obj(), node("n3").obj()])
    h.pods([pinned_to("n1").req(cpu="2").obj()])
    await h.settle()
    assert h.client.conditions["default/p"].message == (
        "0/3 nodes are available: 1 Insufficient cpu, "
        "2 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )
    assert queued(h, "default/p").unschedulable_plugins == {"NodeAffinity", "NodeResourcesFit"}
    await h.close()


class _OnlyNodes:
    """A PreFilter plugin restricting the cycle to the nodes named in its args."""

    def __init__(self, name: str, nodes: frozenset[str]) -> None:
        self.name = name
        self.nodes = nodes

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        return PreFilterResult(self.nodes), SUCCESS


def _harness(plugins: dict[str, frozenset[str]]) -> Harness:
    registry = default_registry()
    for name, nodes in plugins.items():
        registry.register(
            PluginSpec(name, lambda a, h, n=name, s=nodes: _OnlyNodes(n, s), None, _OnlyNodes)
        )
    enabled = [{"name": name} for name in plugins]
    return Harness(
        {"profiles": [{"plugins": {"preFilter": {"enabled": enabled}}}]},
        registry=registry,
    ).nodes([node("n1").obj(), node("n2").obj(), node("n3").obj()])


async def test_two_prefilter_results_intersect() -> None:
    h = _harness({"OnlyAB": frozenset({"n1", "n2"}), "OnlyBC": frozenset({"n2", "n3"})})
    h.pods([make_pod().name("p").req(cpu="1").scheduler_name("troupe-scheduler").obj()])
    await h.settle()
    assert h.client.bindings == [("default/p", "n2")]
    await h.close()


async def test_disjoint_prefilter_results_name_every_plugin() -> None:
    h = _harness({"OnlyN3": frozenset({"n3"}), "OnlyN1": frozenset({"n1"})})
    h.pods([make_pod().name("p").req(cpu="1").scheduler_name("troupe-scheduler").obj()])
    await h.settle()
    # Upstream RunPreFilterPlugins: the sorted plugin list, formatted as Go's %v.
    assert h.client.conditions["default/p"].message == (
        "0/3 nodes are available: node(s) didn't satisfy plugin(s) [OnlyN1 OnlyN3] simultaneously."
    )
    assert queued(h, "default/p").unschedulable_plugins == {"OnlyN1", "OnlyN3"}
    await h.close()


async def test_an_empty_prefilter_result_names_its_plugin() -> None:
    h = _harness({"OnlyNone": frozenset()})
    h.pods([make_pod().name("p").req(cpu="1").scheduler_name("troupe-scheduler").obj()])
    await h.settle()
    assert h.client.conditions["default/p"].message == (
        "0/3 nodes are available: node(s) didn't satisfy plugin OnlyNone."
    )
    assert queued(h, "default/p").unschedulable_plugins == {"OnlyNone"}
    await h.close()
