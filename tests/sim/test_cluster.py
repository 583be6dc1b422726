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
from troupe.sim.apiserver.registry.binding import bind

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


def bare_node(name: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": annotations},
    }


def ready(sim: SimCluster, name: str) -> str | None:
    node = sim.store.get("nodes", name)
    for condition in node.get("status", {}).get("conditions") or []:
        if condition["type"] == "Ready":
            return str(condition["status"])
    return None


async def test_a_node_created_through_the_store_gets_a_kubelet_and_a_kubelet_status(
    cluster: SimCluster, clock: FakeClock
) -> None:
    cluster.store.create("nodes", bare_node("api-0"))
    await settle()
    status = cluster.store.get("nodes", "api-0")["status"]
    assert ready(cluster, "api-0") == "True"
    # Filled in as a kubelet reports it: a default capacity, allocatable = capacity,
    # the next InternalIP of the cluster, nodeInfo, healthy pressure conditions.
    assert status["allocatable"] == status["capacity"] == NodeSpec(1).capacity()
    assert status["addresses"] == [
        {"type": "InternalIP", "address": "10.0.0.3"},
        {"type": "Hostname", "address": "api-0"},
    ]
    assert status["nodeInfo"]["kubeletVersion"]
    assert {c["type"] for c in status["conditions"]} == {
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
    }
    await bound_pod(cluster, "p", node="api-0")
    clock.advance(1)
    await settle()
    assert phase(cluster, "p") == "Running"
    assert cluster.store.get("pods", "p", "default")["status"]["hostIP"] == "10.0.0.3"
    assert cluster.node_names == ["api-0", "node-0", "node-1"]


async def test_what_a_node_reports_itself_is_kept_and_a_not_ready_node_turns_ready(
    cluster: SimCluster,
) -> None:
    node = bare_node("api-0")
    node["status"] = {
        "capacity": {"cpu": "4", "memory": "8Gi", "pods": "20"},
        "allocatable": {"cpu": "3", "memory": "7Gi", "pods": "20"},
        "addresses": [{"type": "InternalIP", "address": "192.168.1.5"}],
        "conditions": [{"type": "Ready", "status": "False", "reason": "Booting"}],
    }
    cluster.store.create("nodes", node)
    await settle()
    status = cluster.store.get("nodes", "api-0")["status"]
    assert status["allocatable"] == {"cpu": "3", "memory": "7Gi", "pods": "20"}
    assert status["capacity"] == {"cpu": "4", "memory": "8Gi", "pods": "20"}
    assert status["addresses"] == [{"type": "InternalIP", "address": "192.168.1.5"}]
    (condition,) = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert (condition["status"], condition["reason"]) == ("True", "KubeletReady")


async def test_nodes_of_the_cluster_are_taken_without_a_write(cluster: SimCluster) -> None:
    # They already report what a kubelet reports: no event until the first heartbeat.
    assert {n["metadata"]["resourceVersion"] for n in cluster.store.list("nodes")} == {
        cluster.store.get("nodes", "node-0")["metadata"]["resourceVersion"],
        cluster.store.get("nodes", "node-1")["metadata"]["resourceVersion"],
    }
    before = [n["metadata"]["resourceVersion"] for n in cluster.store.list("nodes")]
    await settle()
    assert [n["metadata"]["resourceVersion"] for n in cluster.store.list("nodes")] == before


async def test_heartbeats_stamp_the_conditions_periodically(
    cluster: SimCluster, clock: FakeClock
) -> None:
    def heartbeats() -> set[str]:
        status = cluster.store.get("nodes", "node-0")["status"]
        return {c["lastHeartbeatTime"] for c in status["conditions"]}

    (first,) = heartbeats()
    clock.advance(cluster.kubelets.heartbeat * 2 + 1)  # type: ignore[operator]
    await settle()
    (second,) = heartbeats()
    assert second > first
    clock.advance(cluster.kubelets.heartbeat + 1)  # type: ignore[operator]
    await settle()
    (third,) = heartbeats()
    assert third > second


async def test_a_node_annotated_for_no_kubelet_gets_none_until_the_annotation_goes(
    cluster: SimCluster, clock: FakeClock
) -> None:
    cluster.store.create("nodes", bare_node("bare", **{"troupe.dev/kubelet": "none"}))
    await settle()
    assert ready(cluster, "bare") is None
    assert "bare" not in cluster.kubelets.nodes
    await bound_pod(cluster, "p", node="bare")
    clock.advance(5)
    await settle()
    assert phase(cluster, "p") == "Pending"
    cluster.store.delete("pods", "p", "default")
    clock.advance(5)
    await settle()
    assert cluster.store.get("pods", "p", "default")["metadata"]["deletionTimestamp"]
    # Without the annotation the node's kubelet comes up and finishes the delete.
    node = cluster.store.get("nodes", "bare")
    node["metadata"]["annotations"] = {}
    cluster.store.update("nodes", node)
    await settle()
    assert ready(cluster, "bare") == "True"
    clock.advance(1)
    await settle()
    assert phase(cluster, "p") is None


async def test_a_deleted_node_stops_its_kubelet_and_a_new_one_of_that_name_gets_one(
    cluster: SimCluster, clock: FakeClock
) -> None:
    cluster.store.create("nodes", bare_node("api-0"))
    await settle()
    cluster.store.delete("nodes", "api-0")
    await settle()
    assert "api-0" not in cluster.kubelets.nodes
    await bound_pod(cluster, "p", node="api-0")
    clock.advance(5)
    await settle()
    assert phase(cluster, "p") == "Pending"
    # A node of that name again: its kubelet starts the pod already bound to it.
    cluster.store.create("nodes", bare_node("api-0"))
    await settle()
    clock.advance(1)
    await settle()
    assert phase(cluster, "p") == "Running"
    # One heartbeat chain, not one per take: the first node's timer lapses when due.
    live = cluster.kubelets.nodes["api-0"]
    timers = [t for t in cluster.kubelets._timers if t[2] == "heartbeat" and t[4] == "api-0"]
    assert [t[5] == live for t in timers].count(True) == 1
    clock.advance(3 * cluster.kubelets.heartbeat)  # type: ignore[operator]
    await settle()
    timers = [t for t in cluster.kubelets._timers if t[2] == "heartbeat" and t[4] == "api-0"]
    assert [t[5] for t in timers] == [live]


async def test_nodes_created_before_the_cluster_starts_get_kubelets(clock: FakeClock) -> None:
    sim = SimCluster([], clock=clock)
    sim.store.create("nodes", bare_node("early"))
    async with sim:
        await settle()
        assert ready(sim, "early") == "True"


async def test_a_pod_whose_node_lost_its_kubelet_before_it_started_starts_when_it_is_back(
    cluster: SimCluster, clock: FakeClock
) -> None:
    def annotate(value: str | None) -> None:
        node = cluster.store.get("nodes", "node-0")
        node["metadata"]["annotations"] = {} if value is None else {"troupe.dev/kubelet": value}
        cluster.store.update("nodes", node)

    await bound_pod(cluster, "p")
    annotate("none")
    clock.advance(2)
    await settle()
    assert phase(cluster, "p") == "Pending"
    annotate(None)
    await settle()
    clock.advance(1)
    await settle()
    assert phase(cluster, "p") == "Running"
    cluster.store.delete("pods", "p", "default")
    await settle()
    clock.advance(1)
    await settle()
    assert phase(cluster, "p") is None
    assert cluster.kubelets._orphans == {}
