"""Pods whose node affinity names nodes by metadata.name, through the embedded API
server: the nodes left out are explained, and a named node that appears is used."""

from __future__ import annotations

from typing import Any

from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec

from tests.integration.conftest import eventually, pod


def pinned(name: str, *nodes: str, cpu: str = "500m") -> dict[str, Any]:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(nodes)}]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    return pod(name, cpu=cpu, affinity=affinity)


def scheduled_condition(cluster: SimCluster, name: str) -> dict[str, Any] | None:
    for c in cluster.store.get("pods", name, "default")["status"].get("conditions", []):
        if c["type"] == "PodScheduled":
            return c
    return None


async def test_a_pod_pinned_to_a_node_that_does_not_exist_yet_is_told_so_then_placed(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    cluster.store.create("pods", pinned("pinned", "ghost-0"))
    await eventually(lambda: scheduled_condition(cluster, "pinned") is not None)
    condition = scheduled_condition(cluster, "pinned")
    assert condition is not None and condition["reason"] == "Unschedulable"
    assert condition["message"] == (
        "0/3 nodes are available: 3 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    cluster.add_nodes(NodeSpec(count=1, cpu="4", name_prefix="ghost"))
    await eventually(
        lambda: cluster.store.get("pods", "pinned", "default")["spec"].get("nodeName") == "ghost-0",
        timeout=15,
    )


async def test_nodes_a_pinned_pod_cannot_use_are_counted_beside_the_one_that_is_full(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    cluster.store.create("pods", pinned("too-big", "node-0", cpu="10"))
    await eventually(lambda: scheduled_condition(cluster, "too-big") is not None)
    condition = scheduled_condition(cluster, "too-big")
    assert condition is not None
    assert condition["message"] == (
        "0/3 nodes are available: 1 Insufficient cpu, "
        "2 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )
