"""Preemption end to end: the embedded API server, its kubelets, and a troupe daemon
talking to it over HTTP. A full cluster of low-priority pods; a high-priority pod
arrives and takes the room of the fewest, least important of them."""

from __future__ import annotations

from typing import Any

from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import eventually, pod

CLASSES = {"lowest": 1, "low": 10, "high": 1000}


def get_pod(cluster: SimCluster, name: str) -> dict[str, Any]:
    return cluster.store.get("pods", name, "default")


def priority_classes(cluster: SimCluster) -> None:
    for name, value in CLASSES.items():
        cluster.store.create(
            "priorityclasses.scheduling.k8s.io",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            },
        )
    cluster.store.create(
        "priorityclasses.scheduling.k8s.io",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high-never"},
            "value": 1000,
            "preemptionPolicy": "Never",
        },
    )


class Deletions:
    """Every pod the store deletes, as it last was."""

    def __init__(self, cluster: SimCluster) -> None:
        self.pods: dict[str, dict[str, Any]] = {}
        self.nominated: dict[str, str] = {}
        self.stop = cluster.store.listen("pods", self._on)

    def _on(self, type_: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if type_ == "DELETED":
            self.pods[name] = obj
        elif nominated := obj.get("status", {}).get("nominatedNodeName"):
            self.nominated[name] = nominated


async def fill(cluster: SimCluster, classes: dict[str, str] | None = None, **labels: str) -> None:
    """Four 1-cpu pods bound to each 4-cpu node, running; ``classes``: node -> class."""
    for node in cluster.node_names:
        cls = (classes or {}).get(node, "low")
        for i in range(4):
            extra = {"metadata": {"labels": {"app": labels.get(node, "filler")}}}
            cluster.store.create(
                "pods",
                pod(f"{node}-{i}", cpu="1", nodeName=node, priorityClassName=cls, **extra),
            )

    def all_running() -> bool:
        pods = cluster.store.list("pods", namespace="default")
        return len(pods) == 12 and all(p["status"].get("phase") == "Running" for p in pods)

    await eventually(all_running, what="the filler pods to run")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj["status"].get("conditions", []) if c["type"] == kind), None)


def events(cluster: SimCluster, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.store.list("events.events.k8s.io", namespace="default")
        if e["reason"] == reason
    ]


def metric(daemon: SchedulerDaemon, name: str) -> float:
    return daemon.metrics_registry.get_sample_value(name) or 0.0


async def test_a_high_priority_pod_preempts_the_fewest_low_priority_pods_and_binds_there(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    priority_classes(cluster)
    await fill(cluster)
    gone = Deletions(cluster)
    cluster.store.create("pods", pod("urgent", cpu="2", priorityClassName="high"))
    await eventually(lambda: bool(get_pod(cluster, "urgent")["spec"].get("nodeName")), 15)
    node = get_pod(cluster, "urgent")["spec"]["nodeName"]
    # Two victims, both from the node the preemptor was nominated to and bound on.
    assert gone.nominated["urgent"] == node
    assert len(gone.pods) == 2
    for victim in gone.pods.values():
        assert victim["spec"]["nodeName"] == node
        target = condition(victim, "DisruptionTarget")
        assert target is not None
        assert (target["status"], target["reason"]) == ("True", "PreemptionByScheduler")
        assert target["message"] == (
            "troupe-scheduler: preempting to accommodate a higher priority pod"
        )
    uid = get_pod(cluster, "urgent")["metadata"]["uid"]
    await eventually(lambda: len(events(cluster, "Preempted")) == 2, what="Preempted events")
    assert {e["regarding"]["name"] for e in events(cluster, "Preempted")} == set(gone.pods)
    assert {e["note"] for e in events(cluster, "Preempted")} == {
        f"Preempted by pod {uid} on node {node}"
    }
    assert metric(daemon, "scheduler_preemption_attempts_total") >= 1
    assert metric(daemon, "scheduler_preemption_victims_count") == 1
    assert metric(daemon, "scheduler_preemption_victims_sum") == 2


async def test_a_pod_that_never_preempts_waits_without_evicting(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    priority_classes(cluster)
    await fill(cluster)
    gone = Deletions(cluster)
    cluster.store.create("pods", pod("polite", cpu="2", priorityClassName="high-never"))

    def told() -> bool:
        c = condition(get_pod(cluster, "polite"), "PodScheduled")
        return c is not None and "preemption" in c.get("message", "")

    await eventually(told, what="the polite pod's PodScheduled condition")
    c = condition(get_pod(cluster, "polite"), "PodScheduled")
    assert c is not None and c["message"] == (
        "0/3 nodes are available: 3 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )
    assert gone.pods == {} and not get_pod(cluster, "polite")["spec"].get("nodeName")
    assert metric(daemon, "scheduler_preemption_victims_count") == 0


async def test_a_pod_prefers_a_node_whose_victims_break_no_disruption_budget(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    priority_classes(cluster)
    first, *others = cluster.node_names
    # The first node's pods are the least important, which alone would make it the
    # best candidate; a budget that allows no disruption protects them.
    await fill(cluster, classes={first: "lowest"}, **{first: "guarded"})
    cluster.store.create(
        "poddisruptionbudgets.policy",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guarded", "namespace": "default"},
            "spec": {"minAvailable": 4, "selector": {"matchLabels": {"app": "guarded"}}},
            "status": {"disruptionsAllowed": 0},
        },
    )
    scheduler = daemon.wired
    assert scheduler is not None
    await eventually(lambda: "default/guarded" in scheduler.pdbs, what="the PDB informer")
    gone = Deletions(cluster)
    cluster.store.create("pods", pod("urgent", cpu="2", priorityClassName="high"))
    await eventually(lambda: bool(get_pod(cluster, "urgent")["spec"].get("nodeName")), 15)
    node = get_pod(cluster, "urgent")["spec"]["nodeName"]
    assert node in others
    assert len(gone.pods) == 2
    assert all(v["metadata"]["labels"]["app"] == "filler" for v in gone.pods.values())
