"""Workload-aware preemption (KEP-5710) end to end, driven with the real kubectl:
PriorityClasses, v1beta1 PodGroups with disruption modes, a rack-constrained gang.

The cluster: 3 nodes of 4 cpu, each its own rack (``troupe.dev/rack``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from troupe.api.gangs import POD_GROUP_LABEL
from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import RACK_LABEL

from tests.integration.conftest import Bindings, eventually, pod
from tests.integration.test_preemption import Deletions, condition, priority_classes
from tests.integration.test_v1beta1_gangs_e2e import apply

PODGROUPS = "podgroups.scheduling.k8s.io"


def group(name: str, min_count: int, cls: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": min_count}},
            "priorityClassName": cls,
            **spec,
        },
    }


def members(name: str, count: int, cpu: str, cls: str) -> list[dict[str, Any]]:
    return [
        pod(
            f"{name}-{i}",
            cpu=cpu,
            priorityClassName=cls,
            schedulingGroup={"podGroupName": name},
        )
        for i in range(count)
    ]


def running(cluster: SimCluster, prefix: str, count: int) -> bool:
    pods = [
        p
        for p in cluster.store.list("pods", namespace="default")
        if p["metadata"]["name"].startswith(prefix)
    ]
    return len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)


def pod_message(cluster: SimCluster, name: str) -> str:
    for c in cluster.store.get("pods", name, "default")["status"].get("conditions", []):
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return str(c.get("message", ""))
    return ""


async def test_a_group_with_disruption_all_is_evicted_whole_and_marked(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    priority_classes(cluster)
    bindings = Bindings(cluster)
    # A low-priority gang of 6 x 2 cpu fills the 12 cpu; evicted only as a whole.
    await apply(
        kubeconfig,
        group("batch", 6, "low", disruptionMode={"all": {}}),
        *members("batch", 6, "2", "low"),
    )
    await eventually(lambda: running(cluster, "batch-", 6), timeout=30, what="batch running")
    gone = Deletions(cluster)
    # One high-priority pod of 2 cpu needs one member's room: the whole group goes.
    await apply(kubeconfig, group("train", 1, "high"), *members("train", 1, "2", "high"))
    await eventually(lambda: "default/train-0" in bindings.node, timeout=30, what="train bound")
    assert sorted(gone.pods) == [f"batch-{i}" for i in range(6)]
    for victim in gone.pods.values():
        target = condition(victim, "DisruptionTarget")
        assert target is not None and target["reason"] == "PreemptionByScheduler"

    def marked() -> bool:
        obj = cluster.store.get(PODGROUPS, "batch", "default")
        found = condition(obj, "DisruptionTarget")
        return found is not None and found["reason"] == "PreemptionByScheduler"

    await eventually(marked, timeout=30, what="DisruptionTarget on the PodGroup")
    assert not bindings.twice()


async def test_single_pods_go_before_a_group_of_the_same_priority(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    priority_classes(cluster)
    # An `all` group of 3 x 2 cpu and six single 1-cpu pods, all low: the cluster is full.
    await apply(
        kubeconfig,
        group("batch", 3, "low", disruptionMode={"all": {}}),
        *members("batch", 3, "2", "low"),
    )
    await eventually(lambda: running(cluster, "batch-", 3), timeout=30, what="batch running")
    singles = [pod(f"single-{i}", cpu="1", priorityClassName="low") for i in range(6)]
    await apply(kubeconfig, *singles)
    await eventually(lambda: running(cluster, "single-", 6), timeout=30, what="singles running")
    gone = Deletions(cluster)
    bindings = Bindings(cluster)
    await apply(kubeconfig, group("train", 2, "high"), *members("train", 2, "2", "high"))
    await eventually(
        lambda: {"default/train-0", "default/train-1"} <= set(bindings.node),
        timeout=30,
        what="train bound",
    )
    # A pod group is more important than a single pod of its priority: singles go.
    assert sorted(gone.pods) and all(name.startswith("single-") for name in gone.pods)
    assert len(gone.pods) == 4


async def test_a_rack_constrained_gang_frees_room_inside_one_rack(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    priority_classes(cluster)
    singles = [pod(f"single-{i}", cpu="1", priorityClassName="low") for i in range(12)]
    await apply(kubeconfig, *singles)
    await eventually(lambda: running(cluster, "single-", 12), timeout=30, what="cluster full")
    gone = Deletions(cluster)
    bindings = Bindings(cluster)
    rack = {"topology": [{"key": RACK_LABEL}]}
    await apply(
        kubeconfig,
        group("train", 2, "high", schedulingConstraints=rack),
        *members("train", 2, "2", "high"),
    )
    await eventually(
        lambda: {"default/train-0", "default/train-1"} <= set(bindings.node),
        timeout=30,
        what="train bound",
    )
    # Each rack is one node: both members on it, the 4 victims all from it.
    (node,) = {bindings.node["default/train-0"], bindings.node["default/train-1"]}
    assert len(gone.pods) == 4
    assert {v["spec"]["nodeName"] for v in gone.pods.values()} == {node}


async def test_a_group_that_may_not_preempt_evicts_nothing_and_says_so(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    priority_classes(cluster)
    singles = [pod(f"single-{i}", cpu="1", priorityClassName="low") for i in range(12)]
    await apply(kubeconfig, *singles)
    await eventually(lambda: running(cluster, "single-", 12), timeout=30, what="cluster full")
    gone = Deletions(cluster)
    await apply(
        kubeconfig,
        group("polite", 2, "high", preemptionPolicy="Never"),
        *members("polite", 2, "2", "high"),
    )
    await eventually(
        lambda: "preemptionPolicy=Never" in pod_message(cluster, "polite-0"),
        timeout=30,
        what=lambda: f"the reason, got {pod_message(cluster, 'polite-0')!r}",
    )
    assert gone.pods == {}


async def test_a_gang_too_big_even_with_every_victim_gone_evicts_nothing(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    priority_classes(cluster)
    singles = [pod(f"single-{i}", cpu="1", priorityClassName="low") for i in range(12)]
    await apply(kubeconfig, *singles)
    await eventually(lambda: running(cluster, "single-", 12), timeout=30, what="cluster full")
    gone = Deletions(cluster)
    # 8 x 2 cpu: 16 cpu, the cluster has 12.
    await apply(kubeconfig, group("huge", 8, "high"), *members("huge", 8, "2", "high"))
    await eventually(
        lambda: (
            "would still leave 2 of 8 required members without room"
            in pod_message(cluster, "huge-0")
        ),
        timeout=30,
        what=lambda: f"the reason, got {pod_message(cluster, 'huge-0')!r}",
    )
    assert gone.pods == {}


async def test_a_single_pod_never_evicts_part_of_an_all_group(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    priority_classes(cluster)
    # One 2-cpu member of an `all` group and two 1-cpu singles on each node.
    await apply(
        kubeconfig,
        group("batch", 3, "low", disruptionMode={"all": {}}),
        *members("batch", 3, "2", "low"),
    )
    await eventually(lambda: running(cluster, "batch-", 3), timeout=30, what="batch running")
    await apply(
        kubeconfig, *(pod(f"single-{i}", cpu="1", priorityClassName="low") for i in range(6))
    )
    await eventually(lambda: running(cluster, "single-", 6), timeout=30, what="cluster full")
    gone = Deletions(cluster)
    bindings = Bindings(cluster)
    # A 4-cpu pod needs a whole node: its group member goes only with the whole group.
    await apply(kubeconfig, pod("big", cpu="4", priorityClassName="high"))
    await eventually(lambda: "default/big" in bindings.node, timeout=30, what="big bound")
    batch = sorted(name for name in gone.pods if name.startswith("batch-"))
    assert batch == ["batch-0", "batch-1", "batch-2"]
    singles = [v for name, v in gone.pods.items() if name.startswith("single-")]
    assert {v["spec"]["nodeName"] for v in singles} == {bindings.node["default/big"]}


async def test_two_gangs_preempting_at_once_evict_only_what_both_need_and_both_bind(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    priority_classes(cluster)
    singles = [pod(f"single-{i}", cpu="1", priorityClassName="low") for i in range(12)]
    await apply(kubeconfig, *singles)
    await eventually(lambda: running(cluster, "single-", 12), timeout=30, what="cluster full")
    gone = Deletions(cluster)
    bindings = Bindings(cluster)
    # Both arrive together: the second must leave the first's nominated room alone.
    await apply(
        kubeconfig,
        group("a", 3, "high"),
        group("b", 3, "high"),
        *members("a", 3, "1", "high"),
        *members("b", 3, "1", "high"),
    )
    names = {f"default/{g}-{i}" for g in "ab" for i in range(3)}
    await eventually(lambda: names <= set(bindings.node), timeout=30, what="both gangs bound")
    assert len(gone.pods) == 6
    assert not bindings.twice()


async def test_a_scheduler_plugins_gang_spares_pods_a_disruption_budget_protects(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    priority_classes(cluster)
    guarded = [
        pod(f"guarded-{i}", cpu="1", priorityClassName="lowest", metadata={"labels": {"app": "g"}})
        for i in range(4)
    ]
    others = [pod(f"single-{i}", cpu="1", priorityClassName="low") for i in range(8)]
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guarded", "namespace": "default"},
        "spec": {"minAvailable": 4, "selector": {"matchLabels": {"app": "g"}}},
    }
    await apply(kubeconfig, budget, *guarded, *others)
    await eventually(lambda: running(cluster, "guarded-", 4), timeout=30, what="guarded running")
    await eventually(lambda: running(cluster, "single-", 8), timeout=30, what="cluster full")
    scheduler = daemon.wired
    assert scheduler is not None
    await eventually(lambda: "default/guarded" in scheduler.pdbs, what="the PDB informer")
    gone = Deletions(cluster)
    bindings = Bindings(cluster)
    # The guarded pods are the least important, so without the budget they would go
    # first; the budget allows no disruption, and other pods can make the room.
    gang = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"minMember": 2},
    }
    labels = {"labels": {POD_GROUP_LABEL: "train"}}
    train = [
        pod(f"train-{i}", cpu="2", priorityClassName="high", metadata=labels) for i in range(2)
    ]
    await apply(kubeconfig, gang, *train)
    await eventually(
        lambda: {"default/train-0", "default/train-1"} <= set(bindings.node),
        timeout=30,
        what="train bound",
    )
    assert len(gone.pods) == 4
    assert all(name.startswith("single-") for name in gone.pods)
