"""troupe scheduling through the embedded API server over HTTP, as in production."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.apiserver.registry.binding import bind
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec

from tests.integration.conftest import Bindings, eventually, pod


def events_for(cluster: SimCluster, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.store.list("events.events.k8s.io", namespace="default")
        if e["regarding"]["name"] == name and e["reason"] == reason
    ]


def get_pod(cluster: SimCluster, name: str) -> dict[str, Any]:
    return cluster.store.get("pods", name, "default")


async def test_a_pod_is_bound_and_gets_a_scheduled_event(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    cluster.store.create("pods", pod("web"))
    await eventually(lambda: bool(get_pod(cluster, "web")["spec"].get("nodeName")), what="binding")
    node = get_pod(cluster, "web")["spec"]["nodeName"]
    await eventually(lambda: bool(events_for(cluster, "web", "Scheduled")), what="event")
    (event,) = events_for(cluster, "web", "Scheduled")
    assert event["type"] == "Normal" and event["action"] == "Binding"
    assert event["note"] == f"Successfully assigned default/web to {node}"
    assert event["reportingController"] == "troupe-scheduler"
    conditions = {c["type"]: c for c in get_pod(cluster, "web")["status"]["conditions"]}
    assert conditions["PodScheduled"]["status"] == "True"


async def test_each_profile_reports_events_under_its_own_scheduler_name(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    # kube-scheduler gives every profile its own event recorder.
    await start_daemon(
        profiles=[{"schedulerName": "troupe-scheduler"}, {"schedulerName": "troupe-batch"}]
    )
    cluster.store.create("pods", pod("web"))
    cluster.store.create("pods", pod("job", scheduler="troupe-batch"))
    cluster.store.create("pods", pod("huge", cpu="64", scheduler="troupe-batch"))
    expected = {"web": "Scheduled", "job": "Scheduled", "huge": "FailedScheduling"}
    for name, reason in expected.items():
        await eventually(lambda n=name, r=reason: bool(events_for(cluster, n, r)), what=name)
    reporters = {
        name: events_for(cluster, name, reason)[0]["reportingController"]
        for name, reason in expected.items()
    }
    assert reporters == {"web": "troupe-scheduler", "job": "troupe-batch", "huge": "troupe-batch"}


async def test_a_pod_of_another_scheduler_is_never_touched(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    cluster.store.create("pods", pod("foreign", scheduler="default-scheduler"))
    cluster.store.create("pods", pod("ours"))
    await eventually(lambda: bool(get_pod(cluster, "ours")["spec"].get("nodeName")))
    foreign = get_pod(cluster, "foreign")
    assert not foreign["spec"].get("nodeName")
    assert not foreign["status"].get("conditions")
    assert not events_for(cluster, "foreign", "FailedScheduling")


async def test_an_unschedulable_pod_is_told_why_and_scheduled_when_a_node_fits(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    cluster.store.create("pods", pod("big", cpu="10"))

    def condition() -> dict[str, Any] | None:
        for c in get_pod(cluster, "big")["status"].get("conditions", []):
            if c["type"] == "PodScheduled":
                return c
        return None

    await eventually(lambda: condition() is not None, what="PodScheduled condition")
    c = condition()
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "Unschedulable")
    assert c["message"] == (
        "0/3 nodes are available: 3 Insufficient cpu. "
        "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    )
    await eventually(lambda: bool(events_for(cluster, "big", "FailedScheduling")))
    event = events_for(cluster, "big", "FailedScheduling")[0]
    assert (event["type"], event["action"]) == ("Warning", "Scheduling")
    assert event["note"] == c["message"]
    (name,) = cluster.add_nodes(NodeSpec(count=1, cpu="16", name_prefix="large"))
    await eventually(lambda: get_pod(cluster, "big")["spec"].get("nodeName") == name, timeout=15)


async def test_dropped_watches_and_expired_versions_lose_nothing(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    for i in range(15):
        cluster.store.create("pods", pod(f"a{i}", cpu="100m"))
    cluster.server.faults.drop_watches()
    for i in range(15):
        cluster.store.create("pods", pod(f"b{i}", cpu="100m"))
    cluster.server.faults.compact()
    cluster.server.faults.drop_watches()
    for i in range(15):
        cluster.store.create("pods", pod(f"c{i}", cpu="100m"))
    await eventually(lambda: len(bindings.node) == 45, timeout=20, what="45 bindings")
    assert bindings.twice() == []
    # The cache agrees with the API server: 45 pods of 100m each.
    scheduler = daemon.scheduler
    assert scheduler is not None
    await eventually(lambda: scheduler.cache.assumed_count == 0, what="bindings confirmed")
    assert int(scheduler.cache.table.requested[0].sum()) == 45 * 100


async def test_server_errors_and_slow_responses_delay_but_lose_nothing(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    faults = cluster.server.faults
    faults.fail("POST", r"/binding$", 500, times=6)
    faults.delay("POST", r"/binding$", 0.3, times=4)
    faults.fail("PATCH", r"/status$", 503, times=3)
    for i in range(10):
        cluster.store.create("pods", pod(f"p{i}", cpu="100m"))
    await eventually(lambda: len(bindings.node) == 10, timeout=30, what="10 bindings")
    assert bindings.twice() == []


async def test_a_pod_bound_by_someone_else_meanwhile_is_not_bound_again(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    cluster.server.faults.delay("POST", r"/pods/raced/binding$", 0.5, times=1)
    cluster.store.create("pods", pod("raced"))
    # While troupe's binding is in flight, another actor binds the pod.
    await eventually(lambda: daemon.scheduler is not None and len(daemon.scheduler.bindings) > 0)
    other = cluster.node_names[0]
    bind(cluster.store, "default", "raced", {"target": {"kind": "Node", "name": other}})
    scheduler = daemon.scheduler
    assert scheduler is not None
    await eventually(lambda: len(scheduler.bindings) == 0, timeout=5, what="binding settled")
    await eventually(lambda: scheduler.cache.node_of("default/raced") == other, what="cache")
    assert get_pod(cluster, "raced")["spec"]["nodeName"] == other
    assert bindings.twice() == []


async def test_a_pod_deleted_and_recreated_during_binding_is_bound_once(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    audit = cluster.server.start_audit()
    cluster.server.faults.delay("POST", r"/pods/phoenix/binding$", 0.5, times=1)
    first = cluster.store.create("pods", pod("phoenix"))
    await eventually(lambda: daemon.scheduler is not None and len(daemon.scheduler.bindings) > 0)
    cluster.store.delete("pods", "phoenix", "default", grace_period_seconds=0)
    second = cluster.store.create("pods", pod("phoenix"))
    assert first["metadata"]["uid"] != second["metadata"]["uid"]
    await eventually(lambda: bool(get_pod(cluster, "phoenix")["spec"].get("nodeName")), timeout=15)
    assert get_pod(cluster, "phoenix")["metadata"]["uid"] == second["metadata"]["uid"]
    assert bindings.twice() == []
    # Only the new pod was ever bound, and by its own binding: the stale one (old UID)
    # was refused by the server's UID precondition, not accepted for the new pod.
    assert [k for k in bindings.count if k.startswith("default/phoenix/")] == [
        f"default/phoenix/{second['metadata']['uid']}"
    ]
    answers = [
        (r.code, r.message) for r in audit if r.method == "POST" and r.path.endswith("/binding")
    ]
    stale, *rest = answers
    assert stale[0] == 409
    assert (
        f"Precondition failed: UID in precondition: {first['metadata']['uid']}, "
        f"UID in object meta: {second['metadata']['uid']}"
    ) in stale[1]
    assert [code for code, _ in rest] == [201]
