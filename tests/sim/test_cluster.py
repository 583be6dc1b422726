"""SimCluster, NodeSpec and the simulated kubelets on a FakeClock: node objects, runtime
node changes, pods moving Pending -> Running -> Succeeded, graceful deletes finished by
the node."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from troupe.api.clock import FakeClock
from troupe.sim import NodeSpec, SimCluster
from troupe.sim.apiserver.binding import bind

from tests.sim.conftest import pod


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.fixture
async def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def cluster(clock: FakeClock) -> AsyncIterator[SimCluster]:
    sim = SimCluster([NodeSpec(2, gpus=0)], kubelet_delay=1.0, clock=clock)
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()


def phase(sim: SimCluster, name: str) -> str | None:
    found = sim.store.find(sim.store.resolve("pods"), "default", name)
    return None if found is None else found["status"]["phase"]


async def bound_pod(sim: SimCluster, name: str, node: str = "node-0", **annotations: str) -> None:
    body: dict[str, Any] = pod(name)
    body["metadata"]["annotations"] = annotations
    sim.store.create("pods", body)
    bind(sim.store, "default", name, {"target": {"kind": "Node", "name": node}})
    await settle()


def test_node_spec_labels_capacity_and_taints() -> None:
    spec = NodeSpec(
        4,
        cpu="8",
        memory="32Gi",
        pods=50,
        gpus=2,
        zones=("z1", "z2"),
        racks=2,
        labels={"pool": "gpu"},
        taints=({"key": "gpu", "value": "true", "effect": "NoSchedule"},),
        name_prefix="gpu",
    )
    nodes = [spec.node(i) for i in range(4)]
    labels = [n["metadata"]["labels"] for n in nodes]
    assert [n["metadata"]["name"] for n in nodes] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert [lbl["kubernetes.io/hostname"] for lbl in labels] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert [lbl["topology.kubernetes.io/zone"] for lbl in labels] == ["z1", "z2", "z1", "z2"]
    assert [lbl["troupe.dev/rack"] for lbl in labels] == ["z1-r0", "z2-r0", "z1-r1", "z2-r1"]
    assert all(lbl["pool"] == "gpu" for lbl in labels)
    assert nodes[0]["status"]["allocatable"] == {
        "cpu": "8",
        "memory": "32Gi",
        "pods": "50",
        "ephemeral-storage": "100Gi",
        "nvidia.com/gpu": "2",
    }
    assert nodes[0]["spec"]["taints"] == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]


def test_no_gpu_resource_without_gpus() -> None:
    assert "nvidia.com/gpu" not in NodeSpec(1).node(0)["status"]["capacity"]


async def test_cluster_creates_nodes_and_installs_the_pod_group_crd(cluster: SimCluster) -> None:
    assert [n["metadata"]["name"] for n in cluster.store.list("nodes")] == ["node-0", "node-1"]
    assert cluster.store.registry.lookup("scheduling.x-k8s.io", "v1alpha1", "podgroups") is not None


async def test_cluster_without_crds(clock: FakeClock) -> None:
    async with SimCluster([], install_crds=False, clock=clock) as sim:
        assert sim.store.registry.lookup("scheduling.x-k8s.io", "v1alpha1", "podgroups") is None


async def test_add_nodes_continues_numbering_and_remove_node_deletes_its_pods(
    cluster: SimCluster,
) -> None:
    assert cluster.add_nodes(NodeSpec(2)) == ["node-2", "node-3"]
    await bound_pod(cluster, "p", node="node-3")
    cluster.remove_node("node-3")
    assert cluster.node_names == ["node-0", "node-1", "node-2"]
    assert phase(cluster, "p") is None


async def test_bound_pod_runs_after_the_kubelet_delay(
    cluster: SimCluster, clock: FakeClock
) -> None:
    await bound_pod(cluster, "p")
    clock.advance(0.5)
    await settle()
    assert phase(cluster, "p") == "Pending"
    clock.advance(0.5)
    await settle()
    running = cluster.store.get("pods", "p", "default")
    status = running["status"]
    assert status["phase"] == "Running"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    assert status["startTime"] and status["hostIP"] == "10.0.0.1" and status["podIP"]
    assert [(c["name"], c["ready"], list(c["state"])) for c in status["containerStatuses"]] == [
        ("c", True, ["running"])
    ]


async def test_run_seconds_annotation_completes_the_pod(
    cluster: SimCluster, clock: FakeClock
) -> None:
    await bound_pod(cluster, "job", **{"troupe.dev/run-seconds": "10"})
    clock.advance(1)
    await settle()
    clock.advance(9.5)
    await settle()
    assert phase(cluster, "job") == "Running"
    clock.advance(0.5)
    await settle()
    done = cluster.store.get("pods", "job", "default")["status"]
    assert done["phase"] == "Succeeded"
    assert done["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert {c["type"]: c["status"] for c in done["conditions"]}["Ready"] == "False"


async def test_kubelet_finishes_graceful_deletes(cluster: SimCluster, clock: FakeClock) -> None:
    await bound_pod(cluster, "p")
    clock.advance(1)
    await settle()
    cluster.store.delete("pods", "p", "default")
    await settle()
    assert phase(cluster, "p") == "Running"
    clock.advance(1)
    await settle()
    assert phase(cluster, "p") is None


async def test_pods_on_unknown_nodes_are_left_alone(cluster: SimCluster, clock: FakeClock) -> None:
    await bound_pod(cluster, "p", node="elsewhere")
    clock.advance(5)
    await settle()
    assert phase(cluster, "p") == "Pending"
