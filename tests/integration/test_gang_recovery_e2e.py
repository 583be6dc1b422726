"""Gangs left partly bound (a replica killed in the middle of a gang's bindings),
end to end through the embedded API server: troupe places the rest first; past the
group's timeout it evicts the bound members (``partialGangPolicy: Evict``, through
the Eviction API, so budgets are respected) or keeps them and says so (``Keep``).

The crash is reproduced as its result: some members bound through the binding
subresource (as a previous scheduler would have), the rest pending, before troupe
starts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from troupe.api.gangs import POD_GROUP_LABEL
from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.apiserver.registry.binding import bind
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod

GROUP = "train"


def member(i: int, cpu: str = "1") -> dict[str, Any]:
    return pod(f"{GROUP}-{i}", cpu=cpu, metadata={"labels": {POD_GROUP_LABEL: GROUP, "app": GROUP}})


def left_partly_bound(cluster: SimCluster, size: int, bound: int, timeout: int = 2) -> None:
    """A gang of ``size`` (minMember ``size``), ``bound`` of them bound to the first node."""
    cluster.store.create(
        "podgroups.scheduling.x-k8s.io",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": GROUP, "namespace": "default"},
            "spec": {"minMember": size, "scheduleTimeoutSeconds": timeout},
        },
    )
    for i in range(size):
        cluster.store.create("pods", member(i))
    first = cluster.node_names[0]
    for i in range(bound):
        bind(cluster.store, "default", f"{GROUP}-{i}", {"target": {"name": first}})


def fill(cluster: SimCluster, cpu_per_node: dict[str, str]) -> None:
    """Pods of another scheduler already bound, taking room."""
    for node, cpu in cpu_per_node.items():
        cluster.store.create("pods", pod(f"filler-{node}", cpu=cpu, scheduler="other"))
        bind(cluster.store, "default", f"filler-{node}", {"target": {"name": node}})


def events(cluster: SimCluster, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.store.list("events.events.k8s.io", namespace="default")
        if e["regarding"]["name"] == name and e["reason"] == reason
    ]


def exists(cluster: SimCluster, name: str) -> bool:
    return any(p["metadata"]["name"] == name for p in cluster.store.list("pods", "default"))


def node_of(cluster: SimCluster, name: str) -> str:
    node: str = cluster.store.get("pods", name, "default")["spec"].get("nodeName", "")
    return node


def metric(daemon: SchedulerDaemon, name: str, **labels: str) -> float:
    registry = daemon.metrics.registry
    value = registry.get_sample_value(name, labels)
    return value if value is not None else 0.0


async def test_the_rest_of_a_partly_bound_gang_is_placed_once_room_frees_and_nothing_is_evicted(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    _, second, third = cluster.node_names
    # 3 nodes x 4 cpu: 3 of 6 bound on the first node; the others are nearly full.
    left_partly_bound(cluster, size=6, bound=3, timeout=6)
    fill(cluster, {second: "3500m", third: "3500m"})
    bindings = Bindings(cluster)
    daemon = await start_daemon()
    await eventually(lambda: bool(events(cluster, GROUP, "GangPartiallyBound")), timeout=10)
    note = events(cluster, GROUP, "GangPartiallyBound")[0]["note"]
    assert note.startswith("gang default/train: 3 of 6 required pods bound and 3 pending"), note
    cluster.store.delete("pods", f"filler-{second}", "default")
    await eventually(
        lambda: all(node_of(cluster, f"{GROUP}-{i}") for i in range(6)),
        timeout=20,
        what="the gang's pending members bound",
    )
    await eventually(
        lambda: metric(daemon, "troupe_partial_gang_outcomes_total", result="completed") == 1
    )
    await asyncio.sleep(1.5)
    assert all(exists(cluster, f"{GROUP}-{i}") for i in range(6))
    assert metric(daemon, "troupe_partial_gang_outcomes_total", result="evicted") == 0
    assert bindings.twice() == []


async def test_a_partly_bound_gang_that_fits_is_completed_in_its_first_cycle(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    left_partly_bound(cluster, size=6, bound=3)
    await start_daemon()
    await eventually(
        lambda: all(node_of(cluster, f"{GROUP}-{i}") for i in range(6)),
        timeout=20,
        what="the gang's pending members bound",
    )
    await asyncio.sleep(2.5)  # past the group's timeout: nothing is evicted
    assert all(exists(cluster, f"{GROUP}-{i}") for i in range(6))


async def test_a_partly_bound_gang_that_cannot_complete_has_its_bound_members_evicted(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    _, second, third = cluster.node_names
    # 3 bound on the first node (1 cpu free there); the others are nearly full, so
    # only 2 of the 3 pending members fit anywhere.
    left_partly_bound(cluster, size=6, bound=3)
    fill(cluster, {second: "3500m", third: "3500m"})
    daemon = await start_daemon()
    await eventually(lambda: bool(events(cluster, GROUP, "GangPartiallyBound")), timeout=10)
    assert metric(daemon, "troupe_partial_gangs", profile="troupe-scheduler", policy="Evict") == 1
    await eventually(
        lambda: not any(exists(cluster, f"{GROUP}-{i}") for i in range(3)),
        timeout=20,
        what="the bound members evicted",
    )
    # The pending members were never bound: no placement counted the evicted ones.
    assert all(not node_of(cluster, f"{GROUP}-{i}") for i in range(3, 6))
    notes = [e["note"] for e in events(cluster, GROUP, "GangPartiallyBound")]
    assert any("3 of 6 required pods bound" in n and "evicting" in n for n in notes), notes
    await eventually(lambda: bool(events(cluster, f"{GROUP}-0", "GangPartiallyBound")))
    await eventually(
        lambda: metric(daemon, "troupe_partial_gang_outcomes_total", result="evicted") == 1
    )
    await eventually(
        lambda: (
            metric(daemon, "troupe_partial_gangs", profile="troupe-scheduler", policy="Evict") == 0
        )
    )


async def test_a_disruption_budget_holds_the_eviction_until_it_allows_it(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    _, second, third = cluster.node_names
    left_partly_bound(cluster, size=6, bound=3)
    fill(cluster, {second: "3500m", third: "3500m"})
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": GROUP}}},
    }
    cluster.store.create("poddisruptionbudgets.policy", budget)
    await start_daemon()
    await eventually(
        lambda: any(
            "could not evict" in e["note"] for e in events(cluster, GROUP, "GangPartiallyBound")
        ),
        timeout=20,
        what="the refused evictions reported",
    )
    assert all(exists(cluster, f"{GROUP}-{i}") for i in range(3))
    cluster.store.delete("poddisruptionbudgets.policy", "train", "default")
    await eventually(
        lambda: not any(exists(cluster, f"{GROUP}-{i}") for i in range(3)),
        timeout=30,
        what="the bound members evicted once the budget is gone",
    )


async def test_keep_leaves_the_bound_members_and_says_so(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    first, second, third = cluster.node_names
    left_partly_bound(cluster, size=6, bound=3)
    fill(cluster, {second: "3500m", third: "3500m"})
    daemon = await start_daemon(profiles=[{"partialGangPolicy": "Keep"}])
    await eventually(
        lambda: any(
            "partialGangPolicy: Keep" in e["note"] and "kept" in e["note"]
            for e in events(cluster, GROUP, "GangPartiallyBound")
        ),
        timeout=20,
        what="the gang told its bound members are kept",
    )

    def pending_message() -> str:
        conditions = cluster.store.get("pods", f"{GROUP}-5", "default")["status"].get(
            "conditions", []
        )
        return next((c.get("message", "") for c in conditions if c["type"] == "PodScheduled"), "")

    await eventually(lambda: "partialGangPolicy: Keep" in pending_message(), timeout=10)
    assert all(node_of(cluster, f"{GROUP}-{i}") == first for i in range(3))
    assert metric(daemon, "troupe_partial_gang_outcomes_total", result="kept") == 1
    assert metric(daemon, "troupe_partial_gangs", profile="troupe-scheduler", policy="Keep") == 1


async def test_replacement_members_created_after_the_gang_was_bound_are_not_a_partial_gang(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    first, second, third = cluster.node_names
    # A gang of 4 ran whole; one member was lost and a replacement created later,
    # which does not fit: it waits as a late member, nothing is evicted.
    cluster.store.create(
        "podgroups.scheduling.x-k8s.io",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": GROUP, "namespace": "default"},
            "spec": {"minMember": 4, "scheduleTimeoutSeconds": 1},
        },
    )
    for i in range(3):
        cluster.store.create("pods", member(i))
        bind(cluster.store, "default", f"{GROUP}-{i}", {"target": {"name": first}})
    fill(cluster, {first: "1", second: "4", third: "4"})
    await asyncio.sleep(1.1)  # timestamps have a resolution of one second
    cluster.store.create("pods", member(3))
    await start_daemon()
    await asyncio.sleep(3.5)
    assert all(node_of(cluster, f"{GROUP}-{i}") == first for i in range(3))
    assert events(cluster, GROUP, "GangPartiallyBound") == []


async def test_a_gang_with_a_finished_member_has_run_and_is_left_alone(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    _, second, third = cluster.node_names
    left_partly_bound(cluster, size=6, bound=3, timeout=1)
    fill(cluster, {second: "3500m", third: "3500m"})
    cluster.store.patch_status("pods", f"{GROUP}-0", {"phase": "Succeeded"}, "default")
    await start_daemon()
    await asyncio.sleep(3.5)
    assert all(exists(cluster, f"{GROUP}-{i}") for i in range(1, 3))
    assert events(cluster, GROUP, "GangPartiallyBound") == []
