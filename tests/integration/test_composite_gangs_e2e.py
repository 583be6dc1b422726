"""Kubernetes 1.37 CompositePodGroups end to end (KEP-6012): a gang of groups applied with
the real kubectl against the embedded cluster, placed by troupe all or nothing in one
cycle, reported on its leaf PodGroups (the composite's own status stays empty in 1.37)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from troupe.api.gangs import GangApi, GroupRef
from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.apiserver.registry.binding import bind
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod
from tests.integration.test_v1beta1_gangs_e2e import (
    apply,
    beta_group,
    condition,
    group_events,
    member,
)

COMPOSITES = "compositepodgroups.scheduling.k8s.io"


def composite(name: str, min_group_count: int | None, **spec: Any) -> dict[str, Any]:
    policy = {"gang": {"minGroupCount": min_group_count}} if min_group_count else {"basic": {}}
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "CompositePodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "workloadRef": {"workloadName": "job", "templateName": name},
            "schedulingPolicy": policy,
            **spec,
        },
    }


def child(name: str, min_count: int, parent: str, **spec: Any) -> dict[str, Any]:
    return beta_group(name, min_count, parentCompositePodGroupName=parent, **spec)


def role_quorum() -> list[dict[str, Any]]:
    """A driver PodGroup of 1 and a worker PodGroup with minCount 6 of 8 pods under a
    composite with minGroupCount 2: both or nothing."""
    return [
        composite("job", 2),
        child("driver", 1, "job"),
        child("workers", 6, "job"),
        member("driver", 0),
        *(member("workers", i) for i in range(8)),
    ]


def composite_events(cluster: SimCluster, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.store.list("events.events.k8s.io", namespace="default")
        if e["regarding"]["name"] == name and e["regarding"]["kind"] == "CompositePodGroup"
    ]


async def fill(cluster: SimCluster, bindings: Bindings, cpus: int) -> list[str]:
    """Take ``cpus`` whole cpus of the 12 with plain pods; their names."""
    names = [f"filler-{i}" for i in range(cpus)]
    for name in names:
        cluster.store.create("pods", pod(name, cpu="1"), namespace="default")
    await eventually(
        lambda: all(f"default/{n}" in bindings.node for n in names), timeout=30, what="fillers"
    )
    return names


def bound(bindings: Bindings, group: str) -> list[str]:
    return sorted(k for k in bindings.node if k.startswith(f"default/{group}-"))


async def test_role_quorum_binds_nothing_with_room_for_5_workers_and_driver_and_7_with_room_for_7(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    # 12 cpus, 6 taken: room for the driver and 5 workers (1 cpu each).
    fillers = await fill(cluster, bindings, 6)
    await apply(kubeconfig, *role_quorum())
    await eventually(
        lambda: (condition(cluster, "workers") or {}).get("reason") == "Unschedulable",
        timeout=30,
        what="the leaves told the composite does not fit",
    )
    assert bound(bindings, "driver") == [] and bound(bindings, "workers") == []
    assert (condition(cluster, "driver") or {}).get("reason") == "Unschedulable"
    message = (condition(cluster, "workers") or {}).get("message", "")
    assert "composite default/job: 1 of 2 required groups fit (driver 1/1, workers 5/6)" in message
    await eventually(
        lambda: bool(composite_events(cluster, "job")),
        timeout=30,
        what="a FailedScheduling event on the composite",
    )
    # The composite is one queue entity holding the pods of both leaves.
    queued = daemon.scheduler.queue.get_group(
        GroupRef(GangApi.POD_GROUP, "default", "job", composite=True).key
    )
    assert queued is not None and len(queued.members) == 9

    # Two cpus freed: room for the driver and 7 workers.
    for name in fillers[:2]:
        cluster.store.delete("pods", name, "default", grace_period_seconds=0)
    await eventually(
        lambda: len(bound(bindings, "workers")) == 7 and len(bound(bindings, "driver")) == 1,
        timeout=30,
        what="the driver and 7 workers bound",
    )
    for leaf in ("driver", "workers"):
        await eventually(
            lambda leaf=leaf: (condition(cluster, leaf) or {}).get("status") == "True",  # type: ignore[misc]
            timeout=30,
            what=f"{leaf} PodGroupInitiallyScheduled",
        )
    # Upstream's pod-group attempt metrics count the composite by its type.
    sample = daemon.metrics_registry.get_sample_value
    attempts = "scheduler_podgroup_schedule_attempts_total"
    labels = {"profile": "troupe-scheduler", "type": "compositepodgroup"}
    assert (sample(attempts, {**labels, "result": "unschedulable"}) or 0) >= 1
    assert (sample(attempts, {**labels, "result": "scheduled"}) or 0) >= 1
    # Kubernetes 1.37: the composite's own status stays empty (the leaves report).
    assert not (cluster.store.get(COMPOSITES, "job", "default").get("status") or {}).get(
        "conditions"
    )
    assert bindings.twice() == []


def role_quorum_workload() -> dict[str, Any]:
    """The v1alpha3 Workload of ``role_quorum``: a composite template of the driver and
    worker templates (v1beta1, the version troupe watches, shows none of them)."""
    templates = [
        {"name": name, "schedulingPolicy": {"gang": {"minCount": count}}}
        for name, count in (("driver", 1), ("workers", 6))
    ]
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "Workload",
        "metadata": {"name": "job", "namespace": "default"},
        "spec": {
            "compositePodGroupTemplates": [
                {
                    "name": "job",
                    "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                    "podGroupTemplates": templates,
                }
            ]
        },
    }


async def test_role_quorum_with_its_v1alpha3_workload_binds_as_before(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    await apply(kubeconfig, role_quorum_workload(), *role_quorum())
    await eventually(
        lambda: len(bound(bindings, "workers")) == 8 and len(bound(bindings, "driver")) == 1,
        timeout=30,
        what="the driver and 8 workers bound",
    )
    for leaf in ("driver", "workers"):
        await eventually(
            lambda leaf=leaf: (condition(cluster, leaf) or {}).get("status") == "True",  # type: ignore[misc]
            timeout=30,
            what=f"{leaf} PodGroupInitiallyScheduled",
        )
    stored = cluster.store.get("workloads.v1alpha3.scheduling.k8s.io", "job", "default")
    assert stored["spec"]["compositePodGroupTemplates"][0]["name"] == "job"
    assert bindings.twice() == []


def replica_workload() -> dict[str, Any]:
    """A v1alpha3 Workload of KEP-6012's three levels: a root composite template, a
    replica composite template under it, and its driver and worker PodGroup templates."""
    replica = {
        "name": "replica",
        "schedulingPolicy": {"gang": {"minGroupCount": 2}},
        "podGroupTemplates": [
            {"name": name, "schedulingPolicy": {"gang": {"minCount": count}}}
            for name, count in (("driver", 1), ("workers", 2))
        ],
    }
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "Workload",
        "metadata": {"name": "job", "namespace": "default"},
        "spec": {
            "compositePodGroupTemplates": [
                {
                    "name": "root",
                    "schedulingPolicy": {"gang": {"minGroupCount": 1}},
                    "compositePodGroupTemplates": [replica],
                }
            ]
        },
    }


def replica_groups(root_template: str) -> list[dict[str, Any]]:
    """The groups of ``replica_workload`` (the root naming ``root_template``) and their
    pods: a driver of 1 and 2 workers under replica ``r0``."""

    def ref(template: str) -> dict[str, str]:
        return {"workloadName": "job", "templateName": template}

    root = composite("job", 1)
    root["spec"]["workloadRef"] = ref(root_template)
    replica = composite("r0", 2, parentCompositePodGroupName="job")
    replica["spec"]["workloadRef"] = ref("replica")
    return [
        root,
        replica,
        child("r0-driver", 1, "r0", workloadRef=ref("driver")),
        child("r0-workers", 2, "r0", workloadRef=ref("workers")),
        member("r0-driver", 0),
        *(member("r0-workers", i) for i in range(2)),
    ]


async def apply_workload_first(
    kubeconfig: Path, daemon: SchedulerDaemon, workload: dict[str, Any]
) -> None:
    """Apply ``workload`` and wait until troupe has read it, so the groups applied next
    are never placed before it is known (the informers run independently)."""
    await apply(kubeconfig, workload)
    await eventually(
        lambda: daemon.wired.groups.template_workload("default", "job") is not None,
        timeout=30,
        what="troupe read the Workload",
    )


async def test_a_tree_that_follows_its_v1alpha3_workload_templates_binds(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    await apply_workload_first(kubeconfig, daemon, replica_workload())
    # Read at v1alpha3, with its composite templates.
    read = daemon.wired.groups.template_workload("default", "job")
    assert read is not None and read.api_version == "scheduling.k8s.io/v1alpha3"
    await apply(kubeconfig, *replica_groups("root"))
    await eventually(
        lambda: len(bound(bindings, "r0-workers")) == 2 and len(bound(bindings, "r0-driver")) == 1,
        timeout=30,
        what="the replica's driver and workers bound",
    )
    for leaf in ("r0-driver", "r0-workers"):
        await eventually(
            lambda leaf=leaf: (condition(cluster, leaf) or {}).get("status") == "True",  # type: ignore[misc]
            timeout=30,
            what=f"{leaf} PodGroupInitiallyScheduled",
        )
    assert bindings.twice() == []


async def test_a_composite_naming_no_template_of_its_v1alpha3_workload_is_invalid(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    await apply_workload_first(kubeconfig, daemon, replica_workload())
    # The root names "roots": no composite template of the Workload has that name.
    await apply(kubeconfig, *replica_groups("roots"))
    for leaf in ("r0-driver", "r0-workers"):
        await eventually(
            lambda leaf=leaf: (condition(cluster, leaf) or {}).get("reason") == "Invalid",  # type: ignore[misc]
            timeout=30,
            what=f"{leaf} told its layout is invalid",
        )
    written = condition(cluster, "r0-workers") or {}
    assert written["status"] == "False"
    expected = (
        "CompositePodGroup default/job spec.workloadRef.templateName: composite pod group "
        'template "roots" doesn\'t exist in Workload default/job (it has "root", "replica")'
    )
    assert expected in written["message"]
    await eventually(
        lambda: any(
            expected in e.get("note", "") and e.get("reason") == "FailedScheduling"
            for e in group_events(cluster, "r0-workers")
        ),
        timeout=30,
        what="a FailedScheduling event on the leaf",
    )
    # Never scheduled: the pods stay pending however long troupe looks.
    await asyncio.sleep(1.0)
    assert bound(bindings, "r0-driver") == [] and bound(bindings, "r0-workers") == []


async def test_a_cycle_of_composites_is_invalid_on_the_leaf_and_never_scheduled(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    await apply(
        kubeconfig,
        composite("a", 1, parentCompositePodGroupName="b"),
        composite("b", 1, parentCompositePodGroupName="a"),
        child("leaf", 2, "a"),
        *(member("leaf", i) for i in range(2)),
    )
    await eventually(
        lambda: (condition(cluster, "leaf") or {}).get("reason") == "Invalid",
        timeout=30,
        what="the leaf told its layout is invalid",
    )
    written = condition(cluster, "leaf") or {}
    assert written["status"] == "False"
    assert "the CompositePodGroup tree has a cycle: leaf -> a -> b -> a" in written["message"]
    assert bound(bindings, "leaf") == []


async def test_a_tree_deeper_than_4_levels_is_invalid(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    await apply(
        kubeconfig,
        composite("l1", 1),
        composite("l2", 1, parentCompositePodGroupName="l1"),
        composite("l3", 1, parentCompositePodGroupName="l2"),
        composite("l4", 1, parentCompositePodGroupName="l3"),
        child("deep", 1, "l4"),
        member("deep", 0),
    )
    await eventually(
        lambda: (condition(cluster, "deep") or {}).get("reason") == "Invalid",
        timeout=30,
        what="the leaf told its tree is too deep",
    )
    assert "deeper than 4 levels: deep -> l4 -> l3 -> l2 -> l1" in (
        condition(cluster, "deep") or {}
    ).get("message", "")
    assert bound(bindings, "deep") == []


async def test_children_of_different_workloads_are_invalid(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    await apply(
        kubeconfig,
        composite("job", 1),
        child("other", 1, "job", workloadRef={"workloadName": "else", "templateName": "t"}),
        member("other", 0),
    )
    await eventually(
        lambda: (condition(cluster, "other") or {}).get("reason") == "Invalid",
        timeout=30,
        what="the leaf told it belongs to another Workload",
    )
    assert "belong to different Workloads: other (else), job (job)" in (
        condition(cluster, "other") or {}
    ).get("message", "")
    assert bound(bindings, "other") == []


async def test_a_leaf_waits_for_its_parent_composite_then_joins_it(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    quorum = role_quorum()
    await apply(kubeconfig, *quorum[1:])
    ref = GroupRef(GangApi.POD_GROUP, "default", "workers")
    await eventually(
        lambda: daemon.wired.groups.problem(ref) is not None,
        timeout=30,
        what="the leaves waiting for their parent",
    )
    problem = daemon.wired.groups.problem(ref)
    assert problem is not None and "waiting for CompositePodGroup default/job" in str(problem)
    assert bindings.node == {}
    await apply(kubeconfig, quorum[0])
    await eventually(
        lambda: len(bound(bindings, "workers")) == 8 and len(bound(bindings, "driver")) == 1,
        timeout=30,
        what="the whole composite bound once its object appeared",
    )
    assert bindings.twice() == []


async def test_a_basic_composite_places_its_children_independently(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    # 12 cpus: "small" (2 pods) fits, "huge" (a gang of 4 x 4 cpu) never does.
    await apply(
        kubeconfig,
        composite("loose", None),
        child("small", 2, "loose"),
        child("huge", 4, "loose"),
        *(member("small", i) for i in range(2)),
        *(member("huge", i, cpu="4") for i in range(4)),
    )
    await eventually(
        lambda: len(bound(bindings, "small")) == 2, timeout=30, what="the small child bound"
    )
    await eventually(
        lambda: (condition(cluster, "huge") or {}).get("reason") == "Unschedulable",
        timeout=30,
        what="the big child told",
    )
    assert bound(bindings, "huge") == []


async def test_a_composite_left_partly_bound_has_its_bound_members_evicted(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    """Two of three workers bound (by a scheduler that stopped mid-way), the driver and
    the last worker pending with no room: past the timeout the bound workers go."""
    first, second, third = cluster.node_names
    for obj in (composite("job", 2), child("driver", 1, "job"), child("workers", 3, "job")):
        cluster.store.create(
            COMPOSITES if obj["kind"] == "CompositePodGroup" else "podgroups.scheduling.k8s.io",
            obj,
        )
    cluster.store.create("pods", member("driver", 0))
    for i in range(3):
        cluster.store.create("pods", member("workers", i))
    for i in range(2):
        bind(cluster.store, "default", f"workers-{i}", {"target": {"name": first}})
    for node, cpu in ((first, "2"), (second, "4"), (third, "4")):
        cluster.store.create("pods", pod(f"filler-{node}", cpu=cpu, scheduler="other"))
        bind(cluster.store, "default", f"filler-{node}", {"target": {"name": node}})
    await start_daemon(gangScheduleTimeoutSeconds=2)

    def partial_events() -> list[dict[str, Any]]:
        return [
            e
            for e in cluster.store.list("events.events.k8s.io", namespace="default")
            if e["regarding"]["name"] == "job" and e["reason"] == "GangPartiallyBound"
        ]

    await eventually(lambda: bool(partial_events()), timeout=10, what="the composite found")
    await eventually(
        lambda: (
            not any(
                p["metadata"]["name"] in ("workers-0", "workers-1")
                for p in cluster.store.list("pods", "default")
            )
        ),
        timeout=20,
        what="the bound workers evicted",
    )
    assert not cluster.store.get("pods", "driver-0", "default")["spec"].get("nodeName")
