"""What users see about gangs, end to end through the embedded API server: bad input
reported on the pods and the group, late members of a gang with minResources, and
members beyond the quorum that do not fit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec

from tests.integration.conftest import Bindings, eventually, pod
from tests.integration.test_gangs_e2e import coscheduling, gang_member, native, workload


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    """Two 1-cpu nodes (more are added by the tests that need them)."""
    c = SimCluster([NodeSpec(count=2, cpu="1", memory="4Gi")], bookmark_interval=0.5)
    await c.start()
    yield c
    await c.stop()


def condition(cluster: SimCluster, name: str) -> dict[str, Any]:
    pod = cluster.store.get("pods", name, "default")
    for c in pod["status"].get("conditions", []):
        if c["type"] == "PodScheduled":
            return dict(c)
    return {}


def notes(cluster: SimCluster, name: str) -> list[str]:
    return [
        e["note"]
        for e in cluster.store.list("events.events.k8s.io", namespace="default")
        if e["regarding"]["name"] == name and e["reason"] == "FailedScheduling"
    ]


async def test_bad_gang_input_is_reported_on_pods_and_groups_and_blocks_nothing_else(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    kind, obj = coscheduling("zero", 0)
    cluster.store.create(kind, obj)
    kind, obj = workload("job", 2)
    cluster.store.create(kind, obj)
    kind, obj = native("few", 3)
    cluster.store.create(kind, obj)
    kind, obj = coscheduling("mixed", 2)
    cluster.store.create(kind, obj)
    for i in range(2):
        cluster.store.create("pods", gang_member("coscheduling", "zero", i, "100m"))
        cluster.store.create(
            "pods",
            pod(f"job-{i}", cpu="100m", workloadRef={"name": "job", "podGroup": "wrokers"}),
        )
        cluster.store.create("pods", gang_member("native", "ghost", i, "100m"))
        cluster.store.create("pods", gang_member("native", "few", i, "100m"))
    cluster.store.create("pods", gang_member("coscheduling", "mixed", 0, "100m"))
    odd = gang_member("coscheduling", "mixed", 1, "100m")
    odd["spec"]["schedulerName"] = "default-scheduler"
    cluster.store.create("pods", odd)
    cluster.store.create("pods", pod("solo", cpu="100m"))
    await eventually(lambda: "default/solo" in bindings.node, timeout=30, what="solo bound")

    expected = {
        "zero-0": "scheduling.x-k8s.io/v1alpha1 default/zero: spec.minMember: must be at "
        "least 1, got 0",
        "job-0": 'pod group "wrokers" doesn\'t exist for a workload "job"',
        "mixed-0": (
            "spec.schedulerName: all pods in a single pod group should have the same "
            ".spec.schedulerName set"
        ),
        "ghost-0": 'gang default/ghost: waiting for pods\'s workload "ghost" to appear in '
        "scheduling queue: no PodGroup scheduling.k8s.io/v1beta1 default/ghost exists",
        "few-0": "gang default/few: waiting for minCount pods from a gang to appear in "
        "scheduling queue (spec.schedulingPolicy.gang.minCount is 3; 2 of its pods",
    }

    def told() -> dict[str, str]:
        return {name: condition(cluster, name).get("message", "") for name in expected}

    await eventually(
        lambda: all(want in told()[name] for name, want in expected.items()),
        timeout=30,
        what=lambda: f"conditions on the bad gangs' pods, got {told()}",
    )
    for name in expected:
        assert condition(cluster, name)["reason"] == "SchedulingGated"
    await eventually(
        lambda: all(notes(cluster, name) for name in expected),
        timeout=30,
        what="a FailedScheduling event on every bad gang's pod",
    )
    # The group objects that exist say it too.
    for group in ("zero", "job", "mixed", "few"):
        await eventually(
            lambda g=group: bool(notes(cluster, g)), timeout=30, what=f"event on {group}"
        )
    assert "spec.schedulerName" in notes(cluster, "mixed")[0]
    assert sorted(bindings.node) == ["default/solo"]


async def test_a_late_member_of_a_gang_with_min_resources_is_placed_when_a_node_arrives(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    kind, obj = coscheduling("mr", 2)
    obj["spec"]["minResources"] = {"cpu": "2"}
    cluster.store.create(kind, obj)
    for i in range(3):
        cluster.store.create("pods", gang_member("coscheduling", "mr", i, "1"))
    await eventually(lambda: len(bindings.node) == 2, timeout=30, what="the quorum bound")
    (late,) = [f"mr-{i}" for i in range(3) if f"default/mr-{i}" not in bindings.node]
    await eventually(
        lambda: bool(notes(cluster, late)), timeout=30, what="FailedScheduling on the late member"
    )
    message = condition(cluster, late)["message"]
    assert message.startswith("gang default/mr: 2 of 2 required pods placed; 0/2 nodes")
    assert "minResources" not in message
    cluster.add_nodes(NodeSpec(count=1, cpu="1", memory="4Gi", name_prefix="late"))
    await eventually(
        lambda: f"default/{late}" in bindings.node, timeout=30, what="the late member bound"
    )
    assert bindings.twice() == []


async def test_a_pod_group_takes_its_policy_from_the_workload_template_it_names(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    cluster.store.create(
        "podgroups.scheduling.k8s.io",
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "tpl", "namespace": "default"},
            "spec": {"podGroupTemplateRef": {"workloadName": "w", "podGroupTemplateName": "t"}},
        },
    )
    for i in range(2):
        cluster.store.create("pods", gang_member("native", "tpl", i, "1"))
    await eventually(
        lambda: (
            # Created at v1alpha2, read at v1beta1: the cluster serves one object.
            "spec.workloadRef.workloadName" in condition(cluster, "tpl-0").get("message", "")
        ),
        timeout=30,
        what=lambda: f"the missing Workload reported, got {condition(cluster, 'tpl-0')}",
    )
    assert bindings.node == {}
    cluster.store.create(
        "workloads.v1alpha2.scheduling.k8s.io",
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "Workload",
            "metadata": {"name": "w", "namespace": "default"},
            "spec": {
                "podGroupTemplates": [{"name": "t", "schedulingPolicy": {"gang": {"minCount": 2}}}]
            },
        },
    )
    await eventually(lambda: len(bindings.node) == 2, timeout=30, what="the gang bound")
