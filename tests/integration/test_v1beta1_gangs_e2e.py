"""Kubernetes 1.37 gangs end to end: v1beta1 PodGroups applied and patched with the real
kubectl against the embedded cluster (which serves each PodGroup at v1alpha2 and
v1beta1), read by troupe at one version only."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml
from troupe.api.gangs import GangApi, GroupRef
from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod
from tests.sim.conftest import kubectl

KIND = "podgroups.scheduling.k8s.io"
ALPHA_VIEW = "podgroups.v1alpha2.scheduling.k8s.io"


def beta_group(name: str, min_count: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, **spec},
    }


def member(group: str, i: int, cpu: str = "1", **spec: Any) -> dict[str, Any]:
    return pod(f"{group}-{i}", cpu=cpu, schedulingGroup={"podGroupName": group}, **spec)


async def apply(kubeconfig: Path, *objects: dict[str, Any]) -> None:
    # One YAML stream of documents (kubectl validates a List only against OpenAPI v2,
    # which the embedded cluster does not serve).
    document = "---\n".join(yaml.safe_dump(obj) for obj in objects)
    code, _, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=document)
    assert code == 0, err


def condition(cluster: SimCluster, name: str, kind: str = KIND) -> dict[str, Any] | None:
    group = cluster.store.get(kind, name, "default")
    for c in (group.get("status") or {}).get("conditions") or []:
        if c["type"] == "PodGroupInitiallyScheduled":
            return dict(c)
    return None


def group_events(cluster: SimCluster, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.store.list("events.events.k8s.io", namespace="default")
        if e["regarding"]["name"] == name and e["regarding"]["kind"] == "PodGroup"
    ]


async def test_a_v1beta1_gang_is_read_at_one_version_bound_whole_and_reported(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    await apply(kubeconfig, beta_group("train", 3), *(member("train", i) for i in range(3)))
    await eventually(lambda: len(bindings.node) == 3, timeout=30, what="the gang bound")
    # The cluster serves PodGroups at v1alpha2 and v1beta1; troupe watches v1beta1 only,
    # so the gang exists once in its view.
    assert daemon.gang_apis[GangApi.POD_GROUP] == "scheduling.k8s.io/v1beta1"
    assert daemon.informers is not None
    paths = [i.path for i in daemon.informers.informers]
    assert "/apis/scheduling.k8s.io/v1beta1/podgroups" in paths
    assert not [p for p in paths if p.startswith("/apis/scheduling.k8s.io/v1alpha2/")]
    groups = daemon.wired.groups
    assert groups.refs_for_object(GangApi.POD_GROUP, "default", "train") == [
        GroupRef(GangApi.POD_GROUP, "default", "train")
    ]
    assert groups.placed_count(GroupRef(GangApi.POD_GROUP, "default", "train").key) == 3
    await eventually(
        lambda: condition(cluster, "train") is not None, timeout=30, what="the condition"
    )
    written = condition(cluster, "train")
    assert written is not None and (written["status"], written["reason"]) == ("True", "Scheduled")
    # A v1alpha2 reader sees the same object and the same condition.
    assert condition(cluster, "train", ALPHA_VIEW) == written
    assert bindings.twice() == []


async def test_lowering_min_count_with_kubectl_binds_a_pending_gang_and_raising_evicts_nothing(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    ref = GroupRef(GangApi.POD_GROUP, "default", "big")
    # 3 nodes x 4 cpu: four 4-cpu members never fit together, three do.
    await apply(kubeconfig, beta_group("big", 4), *(member("big", i, cpu="4") for i in range(4)))
    await eventually(
        lambda: (condition(cluster, "big") or {}).get("reason") == "Unschedulable",
        timeout=30,
        what="the gang reported unschedulable",
    )
    assert bindings.node == {}

    async def patch(min_count: int) -> None:
        body = json.dumps({"spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})
        code, _, err = await kubectl(
            kubeconfig, "patch", "podgroup", "big", "--type=merge", "-p", body
        )
        assert code == 0, err

    await patch(3)
    await eventually(lambda: len(bindings.node) == 3, timeout=30, what="3 of 4 bound")
    await eventually(lambda: (condition(cluster, "big") or {}).get("status") == "True", timeout=30)
    bound = dict(bindings.node)

    await patch(4)
    policy = daemon.wired.groups.policy
    await eventually(
        lambda: (p := policy(ref)) is not None and p.min_count == 4,
        timeout=30,
        what="minCount 4 seen by troupe",
    )
    # A few housekeeping rounds: nothing bound is evicted or deleted for the new quorum.
    await asyncio.sleep(1.5)
    for key, node in bound.items():
        name = key.partition("/")[2]
        assert cluster.store.get("pods", name, "default")["spec"]["nodeName"] == node
    assert (condition(cluster, "big") or {}).get("status") == "True"


async def test_a_group_naming_resource_claims_is_told_and_never_scheduled(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    claims = [{"name": "gpus", "resourceClaimTemplateName": "a100"}]
    await apply(
        kubeconfig,
        beta_group("dra", 2, resourceClaims=claims),
        *(member("dra", i) for i in range(2)),
    )
    await eventually(
        lambda: condition(cluster, "dra") is not None, timeout=30, what="the group's condition"
    )
    told = condition(cluster, "dra")
    assert told is not None and (told["status"], told["reason"]) == ("False", "Unschedulable")
    assert "spec.resourceClaims: group ResourceClaims are not supported yet" in told["message"]
    await eventually(lambda: bool(group_events(cluster, "dra")), timeout=30)
    assert bindings.node == {}


async def test_members_with_another_priority_fail_the_group_with_scheduler_error(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    high = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    }
    await apply(
        kubeconfig,
        high,
        beta_group("mixed", 2, priorityClassName="high"),
        member("mixed", 0, priorityClassName="high"),
        member("mixed", 1),
    )
    await eventually(
        lambda: (condition(cluster, "mixed") or {}).get("reason") == "SchedulerError",
        timeout=30,
        what=lambda: f"SchedulerError on the group, got {condition(cluster, 'mixed')}",
    )
    told = condition(cluster, "mixed")
    assert told is not None and told["status"] == "False"
    assert "same priority as the pod group's priority, got 0 (mixed-1)" in told["message"]
    await eventually(lambda: bool(group_events(cluster, "mixed")), timeout=30)
    note = group_events(cluster, "mixed")[0]["note"]
    assert "mixed-1" in note and "spec.priority" in note
    assert bindings.node == {}
