"""Topology-aware gang placement end to end through the embedded API server.

The cluster: 2 zones x 2 racks x 2 nodes of 4 cpu (a rack holds four 2-cpu pods, a
zone eight). Racks are labelled ``troupe.dev/rack`` (``zone-a-r0`` ...), zones
``topology.kubernetes.io/zone``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from troupe.api.gangs import POD_GROUP_LABEL
from troupe.api.topology import PREFERRED_ANNOTATION, REQUIRED_ANNOTATION
from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import RACK_LABEL, ZONE_LABEL, NodeSpec

from tests.integration.conftest import Bindings, eventually, pod

PODGROUPS = "podgroups.scheduling.k8s.io"
COSCHEDULING = "podgroups.scheduling.x-k8s.io"


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    c = SimCluster(
        [NodeSpec(count=8, cpu="4", memory="16Gi", zones=("zone-a", "zone-b"), racks=2)],
        bookmark_interval=0.5,
    )
    await c.start()
    yield c
    await c.stop()


def beta_group(name: str, min_count: int, key: str = RACK_LABEL, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if key:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", **meta},
        "spec": spec,
    }


def member(group: str, i: int, cpu: str = "2") -> dict[str, Any]:
    return pod(f"{group}-{i}", cpu=cpu, schedulingGroup={"podGroupName": group})


def coscheduling(name: str, min_member: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"minMember": min_member},
    }


def labelled(group: str, i: int, cpu: str = "2") -> dict[str, Any]:
    return pod(f"{group}-{i}", cpu=cpu, metadata={"labels": {POD_GROUP_LABEL: group}})


def domains(cluster: SimCluster, bindings: Bindings, group: str, label: str) -> set[str]:
    nodes = {n: cluster.store.get("nodes", n)["metadata"]["labels"] for n in cluster.node_names}
    return {
        nodes[node][label]
        for key, node in bindings.node.items()
        if key.startswith(f"default/{group}-")
    }


def bound(bindings: Bindings, group: str) -> int:
    return sum(1 for key in bindings.node if key.startswith(f"default/{group}-"))


def pod_message(cluster: SimCluster, name: str) -> str:
    for c in cluster.store.get("pods", name, "default")["status"].get("conditions", []):
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return str(c.get("message", ""))
    return ""


async def test_a_v1beta1_gang_with_a_rack_constraint_lands_in_one_rack(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    cluster.store.create(PODGROUPS, beta_group("train", 4))
    for i in range(4):
        cluster.store.create("pods", member("train", i))
    await eventually(lambda: bound(bindings, "train") == 4, timeout=30, what="the gang bound")
    # Unconstrained, LeastAllocated spreads four pods over four nodes of two racks or more.
    assert len(domains(cluster, bindings, "train", RACK_LABEL)) == 1
    assert bindings.twice() == []


async def test_a_gang_no_rack_can_hold_is_unschedulable_naming_the_best_rack(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    # 5 x 2 cpu: the cluster (32 cpu) has room, no rack (8 cpu) does.
    cluster.store.create(PODGROUPS, beta_group("wide", 5))
    for i in range(5):
        cluster.store.create("pods", member("wide", i))
    await eventually(
        lambda: "best rack zone-a-r0: 4 of 5 pods fit" in pod_message(cluster, "wide-0"),
        timeout=30,
        what=lambda: f"the best rack in the message, got {pod_message(cluster, 'wide-0')!r}",
    )

    def group_said() -> bool:
        group = cluster.store.get(PODGROUPS, "wide", "default")
        conditions = (group.get("status") or {}).get("conditions") or []
        events = cluster.store.list("events.events.k8s.io", namespace="default")
        return any("best rack zone-a-r0" in c.get("message", "") for c in conditions) and any(
            e["regarding"]["name"] == "wide" and "best rack zone-a-r0" in e.get("note", "")
            for e in events
        )

    await eventually(group_said, timeout=30, what="the group's condition and event")
    assert bound(bindings, "wide") == 0


async def test_bound_members_pin_a_late_member_to_their_rack(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    cluster.store.create(PODGROUPS, beta_group("pinned", 2))
    for i in range(2):
        cluster.store.create("pods", member("pinned", i, cpu="1"))
    await eventually(lambda: bound(bindings, "pinned") == 2, timeout=30, what="the quorum bound")
    (rack,) = domains(cluster, bindings, "pinned", RACK_LABEL)
    # Three more members: every other rack is emptier, so only the pin keeps them here.
    for i in range(2, 5):
        cluster.store.create("pods", member("pinned", i, cpu="1"))
    await eventually(lambda: bound(bindings, "pinned") == 5, timeout=30, what="late members")
    assert domains(cluster, bindings, "pinned", RACK_LABEL) == {rack}


async def test_a_scheduler_plugins_gang_prefers_one_rack_inside_its_zone_and_falls_back(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    levels = {REQUIRED_ANNOTATION: ZONE_LABEL, PREFERRED_ANNOTATION: RACK_LABEL}
    # 3 x 2 cpu fits one rack; 6 x 2 cpu fits no rack but does fit the other zone.
    cluster.store.create(COSCHEDULING, coscheduling("small", 3, levels))
    for i in range(3):
        cluster.store.create("pods", labelled("small", i))
    await eventually(lambda: bound(bindings, "small") == 3, timeout=30, what="small bound")
    assert len(domains(cluster, bindings, "small", RACK_LABEL)) == 1
    cluster.store.create(COSCHEDULING, coscheduling("large", 6, levels))
    for i in range(6):
        cluster.store.create("pods", labelled("large", i))
    await eventually(lambda: bound(bindings, "large") == 6, timeout=30, what="large bound")
    assert len(domains(cluster, bindings, "large", ZONE_LABEL)) == 1
    assert len(domains(cluster, bindings, "large", RACK_LABEL)) == 2
    assert bindings.twice() == []


async def test_a_v1alpha1_workload_takes_its_topology_from_the_annotation(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    cluster.store.create(
        "workloads.v1alpha1.scheduling.k8s.io",
        {
            "apiVersion": "scheduling.k8s.io/v1alpha1",
            "kind": "Workload",
            "metadata": {
                "name": "job",
                "namespace": "default",
                "annotations": {REQUIRED_ANNOTATION: RACK_LABEL},
            },
            "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 4}}}]},
        },
    )
    for i in range(4):
        cluster.store.create(
            "pods", pod(f"job-{i}", cpu="2", workloadRef={"name": "job", "podGroup": "workers"})
        )
    await eventually(lambda: bound(bindings, "job") == 4, timeout=30, what="the workload bound")
    assert len(domains(cluster, bindings, "job", RACK_LABEL)) == 1


async def test_a_profile_default_gives_scheduler_plugins_gangs_a_rack(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    default = {"api": "scheduling.x-k8s.io/v1alpha1", "required": RACK_LABEL}
    await start_daemon(
        profiles=[
            {
                "schedulerName": "troupe-scheduler",
                "pluginConfig": [{"name": "TopologyPlacement", "args": {"defaults": [default]}}],
            }
        ]
    )
    bindings = Bindings(cluster)
    cluster.store.create(COSCHEDULING, coscheduling("plain", 4, {}))
    for i in range(4):
        cluster.store.create("pods", labelled("plain", i))
    await eventually(lambda: bound(bindings, "plain") == 4, timeout=30, what="the gang bound")
    assert len(domains(cluster, bindings, "plain", RACK_LABEL)) == 1


async def test_a_bad_topology_annotation_is_reported_on_the_field_and_holds_the_group(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    cluster.store.create(COSCHEDULING, coscheduling("bad", 2, {REQUIRED_ANNOTATION: "a/b/c"}))
    for i in range(2):
        cluster.store.create("pods", labelled("bad", i))
    cluster.store.create("pods", pod("plain"))
    field = f"metadata.annotations[{REQUIRED_ANNOTATION}]"
    await eventually(
        lambda: field in pod_message(cluster, "bad-0"),
        timeout=30,
        what=lambda: f"the field in the message, got {pod_message(cluster, 'bad-0')!r}",
    )
    await eventually(lambda: "default/plain" in bindings.node, timeout=30, what="others go on")
    assert bound(bindings, "bad") == 0


async def test_a_composite_keeps_each_group_in_a_rack_and_all_groups_in_one_zone(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    zone = {"topology": [{"key": ZONE_LABEL}]}
    cluster.store.create(
        "compositepodgroups.scheduling.k8s.io",
        {
            "apiVersion": "scheduling.k8s.io/v1alpha3",
            "kind": "CompositePodGroup",
            "metadata": {"name": "job", "namespace": "default"},
            "spec": {
                "workloadRef": {"workloadName": "job", "templateName": "job"},
                "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                "schedulingConstraints": zone,
            },
        },
    )
    for name in ("wa", "wb"):
        group = beta_group(name, 3)
        group["spec"]["parentCompositePodGroupName"] = "job"
        cluster.store.create(PODGROUPS, group)
        for i in range(3):
            cluster.store.create("pods", member(name, i))
    await eventually(
        lambda: bound(bindings, "wa") + bound(bindings, "wb") == 6, timeout=30, what="bound"
    )
    racks = [domains(cluster, bindings, name, RACK_LABEL) for name in ("wa", "wb")]
    assert [len(r) for r in racks] == [1, 1]
    assert racks[0] != racks[1]  # 6 cpu each: one rack (8 cpu) holds one group
    zones = domains(cluster, bindings, "wa", ZONE_LABEL) | domains(
        cluster, bindings, "wb", ZONE_LABEL
    )
    assert len(zones) == 1
    assert bindings.twice() == []


async def test_a_gang_waiting_for_its_label_is_placed_once_nodes_carry_it(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    key = "example.com/nvlink"
    cluster.store.create(PODGROUPS, beta_group("nv", 2, key=key))
    for i in range(2):
        cluster.store.create("pods", member("nv", i))
    await eventually(
        lambda: f"no nodes found with topology label '{key}'" in pod_message(cluster, "nv-0"),
        timeout=30,
        what=lambda: f"upstream's message, got {pod_message(cluster, 'nv-0')!r}",
    )
    for name in cluster.node_names[:2]:
        node = cluster.store.get("nodes", name)
        node["metadata"]["labels"][key] = "domain-1"
        cluster.store.update("nodes", node)
    await eventually(lambda: bound(bindings, "nv") == 2, timeout=30, what="bound once labelled")
    assert domains(cluster, bindings, "nv", key) == {"domain-1"}


async def test_three_levels_pack_into_one_host_inside_one_rack_inside_one_zone(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    levels = {
        REQUIRED_ANNOTATION: ZONE_LABEL,
        PREFERRED_ANNOTATION: f"{RACK_LABEL},kubernetes.io/hostname",
    }
    # 2 x 2 cpu: one 4-cpu node holds both; unconstrained they would spread over two.
    cluster.store.create(COSCHEDULING, coscheduling("pair", 2, levels))
    for i in range(2):
        cluster.store.create("pods", labelled("pair", i))
    await eventually(lambda: bound(bindings, "pair") == 2, timeout=30, what="the pair bound")
    assert len(domains(cluster, bindings, "pair", "kubernetes.io/hostname")) == 1
