"""troupe reports only on groups that are its own, end to end: a scheduler-plugins
PodGroup whose pods all name another scheduler gets no status from troupe, and a pod
naming groups in two APIs is told which one it joins (the other does not count it)."""

from __future__ import annotations

from typing import Any

from troupe.api.gangs import POD_GROUP_LABEL
from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import eventually, pod

COSCHEDULING = "podgroups.scheduling.x-k8s.io"


def coscheduling(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member},
    }


def status(cluster: SimCluster, name: str) -> dict[str, Any]:
    return dict(cluster.store.get(COSCHEDULING, name, "default").get("status") or {})


def labelled(name: str, group: str, scheduler: str = "troupe-scheduler", **spec: Any) -> Any:
    return pod(name, scheduler=scheduler, metadata={"labels": {POD_GROUP_LABEL: group}}, **spec)


async def test_a_group_left_to_another_scheduler_gets_no_status_from_troupe(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    cluster.store.create(COSCHEDULING, coscheduling("theirs", 2))
    cluster.store.create(COSCHEDULING, coscheduling("ours", 2))
    for i in range(2):
        cluster.store.create("pods", labelled(f"theirs-{i}", "theirs", "default-scheduler"))
        cluster.store.create("pods", labelled(f"ours-{i}", "ours"))
    await eventually(
        lambda: status(cluster, "ours").get("phase") == "Running",
        timeout=30,
        what=lambda: f"our group running, got {status(cluster, 'ours')}",
    )
    assert status(cluster, "theirs") == {}


async def test_a_pod_naming_two_groups_is_warned_and_counted_by_the_winner_only(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    cluster.store.create(COSCHEDULING, coscheduling("legacy", 1))
    cluster.store.create(
        "podgroups.scheduling.k8s.io",
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "native", "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}},
        },
    )
    cluster.store.create("pods", labelled("legacy-0", "legacy"))
    cluster.store.create(
        "pods", labelled("both", "legacy", schedulingGroup={"podGroupName": "native"})
    )

    def warnings() -> list[str]:
        return [
            e["note"]
            for e in cluster.store.list("events.events.k8s.io", namespace="default")
            if e["regarding"]["name"] == "both" and e["reason"] == "PodGroupConflict"
        ]

    await eventually(lambda: bool(warnings()), timeout=30, what="the warning on the pod")
    assert warnings()[0] == (
        "pod names groups in 2 APIs: it joins PodGroup scheduling.k8s.io/v1beta1 "
        "default/native (spec.schedulingGroup.podGroupName); PodGroup "
        "scheduling.x-k8s.io/v1alpha1 default/legacy "
        "(metadata.labels[scheduling.x-k8s.io/pod-group]) does not count it"
    )

    def running(name: str) -> bool:
        return cluster.store.get("pods", name, "default")["status"].get("phase") == "Running"

    await eventually(lambda: running("both") and running("legacy-0"), timeout=30)
    await eventually(
        lambda: status(cluster, "legacy").get("phase") == "Running",
        timeout=30,
        what=lambda: f"the legacy group running, got {status(cluster, 'legacy')}",
    )
    assert status(cluster, "legacy")["running"] == 1


async def test_a_native_group_left_to_another_scheduler_gets_no_condition_from_troupe(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    for name in ("theirs", "ours"):
        cluster.store.create(
            "podgroups.scheduling.k8s.io",
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
            },
        )
    for i in range(2):
        cluster.store.create(
            "pods",
            pod(
                f"theirs-{i}",
                scheduler="default-scheduler",
                schedulingGroup={"podGroupName": "theirs"},
            ),
        )
        cluster.store.create("pods", pod(f"ours-{i}", schedulingGroup={"podGroupName": "ours"}))

    def conditions(name: str) -> list[dict[str, Any]]:
        group = cluster.store.get("podgroups.scheduling.k8s.io", name, "default")
        return list((group.get("status") or {}).get("conditions") or [])

    await eventually(lambda: bool(conditions("ours")), timeout=30, what="our group's condition")
    assert conditions("theirs") == []
