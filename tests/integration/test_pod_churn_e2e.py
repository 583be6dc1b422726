"""Pods touched while troupe binds them, through the embedded API server.

Operators and controllers label, annotate, delete and re-create pods at any time.
A pod (or gang member) updated while its binding is in flight must not come back to
be placed again, and nothing that happens to one pod may stop the scheduling loop.
"""

from __future__ import annotations

from typing import Any

from troupe.api.gangs import POD_GROUP_LABEL
from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod


def member(i: int) -> dict[str, Any]:
    return pod(f"g-{i}", cpu="500m", metadata={"labels": {POD_GROUP_LABEL: "g"}})


def create_gang(cluster: SimCluster, size: int) -> None:
    cluster.store.create(
        "podgroups.scheduling.x-k8s.io",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "default"},
            "spec": {"minMember": size},
        },
    )
    for i in range(size):
        cluster.store.create("pods", member(i))


def touch(cluster: SimCluster, name: str) -> None:
    """What ``kubectl label pod NAME touched=yes`` does."""
    current = cluster.store.get("pods", name, "default")
    current["metadata"].setdefault("labels", {})["touched"] = "yes"
    cluster.store.update("pods", current, "default")


async def binding_in_flight(daemon: SchedulerDaemon) -> None:
    await eventually(
        lambda: daemon.scheduler is not None and len(daemon.scheduler.bindings) > 0,
        what="a binding in flight",
    )


async def still_schedules(cluster: SimCluster, daemon: SchedulerDaemon, bindings: Bindings) -> None:
    """The loop is alive: a new pod is still bound."""
    assert daemon.healthy
    cluster.store.create("pods", pod("after", cpu="100m"))
    await eventually(lambda: "default/after" in bindings.node, timeout=15, what="a later pod")
    assert daemon.healthy


async def test_a_gang_member_labelled_while_its_binding_is_in_flight_is_bound_once(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    cluster.server.faults.delay("POST", r"/pods/g-\d+/binding$", 0.5, times=8)
    create_gang(cluster, 8)
    await binding_in_flight(daemon)
    for i in range(8):
        touch(cluster, f"g-{i}")
    await eventually(lambda: len(bindings.node) == 8, timeout=30, what="the gang bound")
    await still_schedules(cluster, daemon, bindings)
    assert bindings.twice() == []
    assert sorted(bindings.node) == sorted([f"default/g-{i}" for i in range(8)] + ["default/after"])


async def test_a_plain_pod_labelled_while_its_binding_is_in_flight_is_bound_once(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    cluster.server.faults.delay("POST", r"/pods/p\d+/binding$", 0.5, times=5)
    for i in range(5):
        cluster.store.create("pods", pod(f"p{i}", cpu="100m"))
    await binding_in_flight(daemon)
    for i in range(5):
        touch(cluster, f"p{i}")
    await eventually(lambda: len(bindings.node) == 5, timeout=30, what="5 bindings")
    await still_schedules(cluster, daemon, bindings)
    assert bindings.twice() == []


async def test_a_gang_member_deleted_and_recreated_while_in_flight_completes_the_gang(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    cluster.server.faults.delay("POST", r"/pods/g-\d+/binding$", 0.5, times=4)
    create_gang(cluster, 4)
    await binding_in_flight(daemon)
    first = cluster.store.get("pods", "g-1", "default")["metadata"]["uid"]
    cluster.store.delete("pods", "g-1", "default", grace_period_seconds=0)
    second = cluster.store.create("pods", member(1))["metadata"]["uid"]
    assert first != second

    def bound() -> set[str]:
        return {
            p["metadata"]["name"]
            for p in cluster.store.list("pods", namespace="default")
            if p["spec"].get("nodeName")
        }

    await eventually(
        lambda: {f"g-{i}" for i in range(4)} <= bound(), timeout=30, what="the gang whole"
    )
    # The recreated pod was bound by its own binding, and nothing twice.
    assert f"default/g-1/{first}" not in bindings.count
    assert bindings.count[f"default/g-1/{second}"] == 1
    assert bindings.twice() == []
    await still_schedules(cluster, daemon, bindings)


async def test_bindings_to_a_deleted_node_are_called_off_and_the_gang_placed_again(
    cluster: SimCluster, start_daemon: Any
) -> None:
    # Four writes a second: the gang's bindings wait their turn in the client.
    daemon: SchedulerDaemon = await start_daemon(clientConnection={"qps": 4, "burst": 1})
    scheduler = daemon.scheduler
    assert scheduler is not None
    bindings = Bindings(cluster)
    create_gang(cluster, 8)
    await eventually(lambda: len(bindings.node) >= 1, timeout=30, what="a first binding")

    def waiting_nodes() -> set[str]:
        nodes = {scheduler.cache.node_of(f"default/g-{i}") for i in range(8)}
        return {n for n in nodes if n} - set(bindings.node.values())

    await eventually(lambda: bool(waiting_nodes()), what="a node with bindings still queued")
    gone = sorted(waiting_nodes())[0]
    cluster.remove_node(gone)

    def bound() -> dict[str, str]:
        return {
            p["metadata"]["name"]: p["spec"]["nodeName"]
            for p in cluster.store.list("pods", namespace="default")
            if p["spec"].get("nodeName")
        }

    await eventually(lambda: len(bound()) == 8, timeout=60, what="the gang bound whole")
    assert gone not in bound().values()
    assert bindings.twice() == []


async def test_a_plain_pod_whose_node_is_deleted_before_its_binding_goes_elsewhere(
    cluster: SimCluster, start_daemon: Any
) -> None:
    daemon: SchedulerDaemon = await start_daemon(clientConnection={"qps": 4, "burst": 1})
    scheduler = daemon.scheduler
    assert scheduler is not None
    bindings = Bindings(cluster)
    for i in range(8):
        cluster.store.create("pods", pod(f"p{i}", cpu="500m"))
    await eventually(lambda: len(bindings.node) >= 1, timeout=30, what="a first binding")

    def waiting_nodes() -> set[str]:
        nodes = {scheduler.cache.node_of(f"default/p{i}") for i in range(8)}
        return {n for n in nodes if n} - set(bindings.node.values())

    await eventually(lambda: bool(waiting_nodes()), what="a node with bindings still queued")
    gone = sorted(waiting_nodes())[0]
    cluster.remove_node(gone)
    await eventually(
        lambda: (
            sum(
                1
                for p in cluster.store.list("pods", namespace="default")
                if p["spec"].get("nodeName")
            )
            == 8
        ),
        timeout=60,
        what="every pod bound",
    )
    on_nodes = {p["spec"]["nodeName"] for p in cluster.store.list("pods", namespace="default")}
    assert gone not in on_nodes
    assert bindings.twice() == []


async def test_a_deleted_pods_event_series_are_forgotten_with_it(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    """A pod's Scheduled event is a series the recorder would otherwise keep for six
    minutes after it was recorded, however short the pod's life: under churn that was
    about 14,000 series, whatever the cluster's size."""
    bindings = Bindings(cluster)
    cluster.store.create("pods", pod("p", cpu="100m"))
    cluster.store.create("pods", pod("q", cpu="100m"))
    await eventually(lambda: len(bindings.node) == 2, what="both pods bound")
    assert daemon.client is not None
    events = daemon.client.events
    await eventually(lambda: len(events) == 2, what="their Scheduled events recorded")
    cluster.store.delete("pods", "p", "default")
    await eventually(lambda: len(events) == 1, what="the deleted pod's series forgotten")
    assert daemon.healthy
