"""An object troupe cannot read (a custom resource stored without schema checks,
with a field of the wrong type) is left out and logged; every other object of its
kind keeps being watched and scheduled. A pod or node whose quantities cannot be used
(written straight into the store, which skips the API server's validation, as a real
server may hold objects from before a check existed) is reported and left out: the
pod with a PodScheduled=False condition and an event, the node with an event."""

from __future__ import annotations

from typing import Any

from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod
from tests.integration.test_gangs_e2e import coscheduling, gang_member


async def test_a_pod_group_that_does_not_parse_blocks_no_other_gang_or_pod(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    kind, broken = coscheduling("broken", 2)
    broken["spec"]["minMember"] = "two"  # not an integer: troupe's model rejects it
    cluster.store.create(kind, broken)
    for i in range(2):
        cluster.store.create("pods", gang_member("coscheduling", "broken", i, "500m"))
    kind, ok = coscheduling("ok", 2)
    cluster.store.create(kind, ok)
    for i in range(2):
        cluster.store.create("pods", gang_member("coscheduling", "ok", i, "500m"))
    cluster.store.create("pods", pod("solo"))
    expected = {"default/ok-0", "default/ok-1", "default/solo"}
    await eventually(
        lambda: expected <= set(bindings.node),
        timeout=30,
        what=lambda: f"the valid gang and the plain pod bound, got {sorted(bindings.node)}",
    )
    # A later valid group still arrives through the same watch.
    kind, late = coscheduling("late", 1)
    cluster.store.create(kind, late)
    cluster.store.create("pods", gang_member("coscheduling", "late", 0, "500m"))
    await eventually(
        lambda: "default/late-0" in bindings.node, timeout=30, what="the later gang bound"
    )
    assert not {"default/broken-0", "default/broken-1"} & set(bindings.node)


async def test_pods_whose_requests_are_unparsable_or_negative_are_never_bound(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    # The embedded server stores what a real one would refuse; troupe must not take
    # a negative request as room given back, nor stop at an unparsable one.
    bindings = Bindings(cluster)
    for name, cpu in (("lots", "lots"), ("negative", "-2"), ("suffix", "1x")):
        cluster.store.create("pods", pod(name, cpu=cpu))
    less_than_nothing = pod("negative-memory")
    less_than_nothing["spec"]["containers"][0]["resources"]["requests"]["memory"] = "-1Gi"
    cluster.store.create("pods", less_than_nothing)
    cluster.store.create("pods", pod("solo"))
    await eventually(lambda: "default/solo" in bindings.node, timeout=30, what="the valid pod")
    cluster.store.create("pods", pod("late"))
    await eventually(lambda: "default/late" in bindings.node, timeout=30, what="a later pod")
    refused = {"default/lots", "default/negative", "default/negative-memory", "default/suffix"}
    assert not refused & set(bindings.node)


def scheduled_condition(cluster: SimCluster, name: str) -> dict[str, Any]:
    stored = cluster.store.get("pods", name, "default")
    for condition in stored.get("status", {}).get("conditions", []):
        if condition["type"] == "PodScheduled":
            return dict(condition)
    return {}


def warnings(cluster: SimCluster, kind: str, name: str, reason: str) -> list[str]:
    return [
        e["note"]
        for e in cluster.store.list("events.events.k8s.io")
        if e["regarding"]["kind"] == kind
        and e["regarding"]["name"] == name
        and e["reason"] == reason
    ]


def scheduler_errors(cluster: SimCluster) -> list[str]:
    """Pods told of an internal error (a score out of range is one)."""
    return [
        f"{p['metadata']['name']}: {c.get('message')}"
        for p in cluster.store.list("pods")
        for c in p.get("status", {}).get("conditions", [])
        if c.get("reason") == "SchedulerError"
    ]


async def test_a_pod_with_unusable_quantities_is_told_why_and_poisons_no_one(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    bad = {
        "negative": ("-2", "spec.containers[0].resources.requests[cpu]", "must be greater"),
        "unparsable": ("1x", "spec.containers[0].resources.requests[cpu]", "regular expression"),
    }
    for name, (cpu, _, _) in bad.items():
        cluster.store.create("pods", pod(name, cpu=cpu))
    overhead = pod("overhead")
    overhead["spec"]["overhead"] = {"memory": "-1Gi"}
    cluster.store.create("pods", overhead)
    bad["overhead"] = ("", "spec.overhead[memory]", "must be greater")
    # Enough valid pods to be scored against each other on every node.
    for i in range(6):
        cluster.store.create("pods", pod(f"ok-{i}", cpu="700m"))
    expected = {f"default/ok-{i}" for i in range(6)}
    await eventually(
        lambda: expected <= set(bindings.node),
        timeout=30,
        what=lambda: f"the valid pods bound, got {sorted(bindings.node)}",
    )
    for name, (_, field, detail) in bad.items():
        await eventually(
            lambda name=name: (
                bool(scheduled_condition(cluster, name))
                and bool(warnings(cluster, "Pod", name, "FailedScheduling"))
            ),
            timeout=30,
            what=f"a condition and an event on {name}",
        )
        condition = scheduled_condition(cluster, name)
        assert (condition["status"], condition["reason"]) == ("False", "InvalidQuantity")
        assert field in condition["message"] and detail in condition["message"]
        assert f"pod default/{name}" in condition["message"]
        assert any(field in note for note in warnings(cluster, "Pod", name, "FailedScheduling"))
    assert not set(bad) & {k.split("/")[1] for k in bindings.node}
    assert scheduler_errors(cluster) == []

    # Corrected (delete and recreate, as a pod's resources are immutable), it schedules.
    cluster.store.delete("pods", "negative", "default", grace_period_seconds=0)
    cluster.store.create("pods", pod("negative", cpu="100m"))
    await eventually(
        lambda: "default/negative" in bindings.node, timeout=30, what="the corrected pod bound"
    )


def node(name: str, cpu: str) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "pool": "odd"}},
        "status": {
            "capacity": dict(resources),
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


async def test_a_node_with_unusable_quantities_is_reported_and_left_out(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    cluster.store.create("nodes", node("odd", "-8"))
    # A pod only that node could take, and pods anywhere.
    cluster.store.create("pods", pod("picky", cpu="1", nodeSelector={"pool": "odd"}))
    for i in range(4):
        cluster.store.create("pods", pod(f"any-{i}", cpu="500m"))
    await eventually(
        lambda: {f"default/any-{i}" for i in range(4)} <= set(bindings.node),
        timeout=30,
        what="the pods that fit elsewhere bound",
    )
    await eventually(
        lambda: bool(warnings(cluster, "Node", "odd", "InvalidNodeResources")),
        timeout=30,
        what="an event on the node",
    )
    [note] = warnings(cluster, "Node", "odd", "InvalidNodeResources")
    assert "status.allocatable[cpu]" in note and "must be greater than or equal to 0" in note
    assert "odd" not in bindings.node.values()
    assert scheduler_errors(cluster) == []

    # Corrected, the node is taken in and the pod that waited for it binds there.
    current = cluster.store.get("nodes", "odd")
    current["status"]["allocatable"]["cpu"] = "8"
    current["status"]["capacity"]["cpu"] = "8"
    cluster.store.update("nodes", current, subresource="status")
    await eventually(
        lambda: bindings.node.get("default/picky") == "odd",
        timeout=30,
        what="the pod bound to the corrected node",
    )
