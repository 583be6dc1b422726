"""Gangs end to end through the embedded API server, for each of the three APIs."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.gangs import POD_GROUP_LABEL
from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod


def coscheduling(name: str, min_member: int) -> tuple[str, dict[str, Any]]:
    return "podgroups.scheduling.x-k8s.io", {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member},
    }


def workload(name: str, min_count: int) -> tuple[str, dict[str, Any]]:
    return "workloads.v1alpha1.scheduling.k8s.io", {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": min_count}}}]},
    }


def native(name: str, min_count: int) -> tuple[str, dict[str, Any]]:
    return "podgroups.scheduling.k8s.io", {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def gang_member(api: str, group: str, i: int, cpu: str) -> dict[str, Any]:
    if api == "coscheduling":
        return pod(f"{group}-{i}", cpu=cpu, metadata={"labels": {POD_GROUP_LABEL: group}})
    if api == "workload":
        return pod(f"{group}-{i}", cpu=cpu, workloadRef={"name": group, "podGroup": "workers"})
    return pod(f"{group}-{i}", cpu=cpu, schedulingGroup={"podGroupName": group})


GROUPS = {"coscheduling": coscheduling, "workload": workload, "native": native}


@pytest.mark.parametrize("api", list(GROUPS))
async def test_a_gang_that_fits_is_bound_whole_and_one_that_does_not_holds_nothing(
    cluster: SimCluster, daemon: SchedulerDaemon, api: str
) -> None:
    bindings = Bindings(cluster)
    # 3 nodes x 4 cpu. "fits": 4 x 2 cpu; "toobig": 7 x 2 cpu fits in no order.
    for name, size in (("fits", 4), ("toobig", 7)):
        kind, obj = GROUPS[api](name, size)
        cluster.store.create(kind, obj)
        for i in range(size):
            cluster.store.create("pods", gang_member(api, name, i, "2"))
    await eventually(lambda: len(bindings.node) >= 4, timeout=30, what="the fitting gang bound")

    def conditions(name: str) -> list[dict[str, Any]]:
        return cluster.store.get("pods", name, "default")["status"].get("conditions", [])

    await eventually(
        lambda: any(
            c.get("reason") == "CoschedulingNotMeetMinMember"
            for i in range(6)
            for c in conditions(f"toobig-{i}")
        ),
        timeout=30,
        what="CoschedulingNotMeetMinMember on the gang that does not fit",
    )
    assert sorted(bindings.node) == [f"default/fits-{i}" for i in range(4)]

    def group_events() -> list[dict[str, Any]]:
        return [
            e
            for e in cluster.store.list("events.events.k8s.io", namespace="default")
            if e["regarding"]["name"] == "toobig" and e["reason"] == "FailedScheduling"
        ]

    # Status patches are written before events: wait for the event too.
    await eventually(lambda: bool(group_events()), timeout=30, what="event on the group")
    assert group_events()[0]["note"].startswith("gang ")
    assert bindings.twice() == []


async def test_a_native_pod_group_reports_pod_group_initially_scheduled(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    # The embedded cluster serves v1beta1 (Kubernetes 1.37): troupe watches that version
    # and writes its condition; a v1alpha2 reader sees it too (conditions convert as is).
    kind, obj = native("pg", 2)
    cluster.store.create(kind, obj)
    for i in range(2):
        cluster.store.create("pods", gang_member("native", "pg", i, "1"))

    def scheduled() -> dict[str, Any] | None:
        group = cluster.store.get(kind, "pg", "default")
        for c in group.get("status", {}).get("conditions", []):
            if c["type"] == "PodGroupInitiallyScheduled":
                return c
        return None

    await eventually(lambda: scheduled() is not None, timeout=30, what="PodGroupInitiallyScheduled")
    condition = scheduled()
    assert condition is not None and (condition["status"], condition["reason"]) == (
        "True",
        "Scheduled",
    )


async def test_a_scheduler_plugins_pod_group_status_follows_its_pods(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    kind, obj = coscheduling("train", 3)
    cluster.store.create(kind, obj)
    for i in range(3):
        cluster.store.create("pods", gang_member("coscheduling", "train", i, "1"))

    def status() -> dict[str, Any]:
        return dict(cluster.store.get(kind, "train", "default").get("status", {}))

    await eventually(
        lambda: status().get("phase") == "Running",
        timeout=30,
        what=lambda: f"phase Running, status {status()}",
    )
    assert status().get("running") == 3
    assert status().get("scheduleStartTime")
