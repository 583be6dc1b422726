"""The kube client module against the embedded API server, over HTTP.

One code path with production: ``connect`` to a kubeconfig, ``KubeClient`` writes,
``SharedInformers`` list + watch. Faults (500, 429 + Retry-After, cut watches,
compaction) come from ``ApiServer.faults``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from troupe.api.client import ApiError, Event, ObjectRef
from troupe.api.clock import RealClock
from troupe.api.objects import Node, Pod, PodCondition
from troupe.api.tasks import TaskSupervisor
from troupe.kube import (
    HttpTransport,
    InformerConfig,
    KubeClient,
    RetryPolicy,
    SharedInformers,
    check_reachable,
    connect,
)
from troupe.sim.apiserver.server import ApiServer

NS = "team-a"


class SleepRecordingClock(RealClock):
    """Real time, but waits are recorded and skipped (Retry-After seconds checked
    without sleeping them)."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await asyncio.sleep(0)


@dataclass
class Cluster:
    server: ApiServer
    http: HttpTransport
    client: KubeClient
    clock: SleepRecordingClock

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        resp = await self.http.request("POST", path, body=json.dumps(obj).encode())
        assert resp.ok, resp.body
        return dict(json.loads(resp.body))

    async def create_pod(self, name: str, **spec: Any) -> Pod:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "schedulerName": "troupe-scheduler",
                "containers": [{"name": "c", "image": "busybox"}],
                **spec,
            },
        }
        created = await self.create(f"/api/v1/namespaces/{NS}/pods", body)
        return Pod.model_validate(created)

    async def create_node(self, name: str) -> Node:
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "pods": "110"}},
        }
        return Node.model_validate(await self.create("/api/v1/nodes", body))

    async def get_pod(self, name: str) -> Pod:
        resp = await self.http.request("GET", f"/api/v1/namespaces/{NS}/pods/{name}")
        assert resp.ok, resp.body
        return Pod.model_validate_json(resp.body)

    async def delete_pod(self, name: str) -> None:
        body = json.dumps({"gracePeriodSeconds": 0}).encode()
        resp = await self.http.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}", body=body)
        assert resp.ok, resp.body

    async def label_pod(self, name: str, value: str) -> None:
        patch = json.dumps({"metadata": {"labels": {"v": value}}}).encode()
        resp = await self.http.request(
            "PATCH",
            f"/api/v1/namespaces/{NS}/pods/{name}",
            body=patch,
            content_type="application/merge-patch+json",
        )
        assert resp.ok, resp.body

    async def pods_on_server(self) -> dict[str, str]:
        resp = await self.http.request("GET", "/api/v1/pods")
        items = json.loads(resp.body)["items"]
        return {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["metadata"][
                "resourceVersion"
            ]
            for p in items
        }

    async def events(self) -> list[dict[str, Any]]:
        resp = await self.http.request("GET", f"/apis/events.k8s.io/v1/namespaces/{NS}/events")
        assert resp.ok, resp.body
        return list(json.loads(resp.body)["items"])


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    server = ApiServer(bookmark_interval=0.2)
    await server.start()
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    api = await connect(str(kubeconfig), None, False, pool_size=8)
    await check_reachable(api)
    clock = SleepRecordingClock()
    client = KubeClient(
        api,
        clock,
        qps=-1,
        burst=100,
        scheduler_name="troupe-scheduler",
        instance="test-host",
        retry=RetryPolicy(max_attempts=4, initial_backoff=0.01, max_backoff=0.05),
    )
    c = Cluster(server, HttpTransport(api), client, clock)
    await c.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    )
    try:
        yield c
    finally:
        await api.close()
        await server.stop()


async def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


# --- binding ------------------------------------------------------------------------------


async def test_bind_sets_the_node_and_a_second_bind_is_a_conflict(cluster: Cluster) -> None:
    pod = await cluster.create_pod("p")
    await cluster.client.bind(pod, "n1")
    assert (await cluster.get_pod("p")).spec.node_name == "n1"
    with pytest.raises(ApiError) as err:
        await cluster.client.bind(pod, "n2")
    assert err.value.status == 409 and "already assigned" in err.value.message
    assert (await cluster.get_pod("p")).spec.node_name == "n1"


async def test_bind_of_a_recreated_pod_is_a_uid_conflict(cluster: Cluster) -> None:
    old = await cluster.create_pod("p")
    await cluster.delete_pod("p")
    new = await cluster.create_pod("p")
    assert new.metadata.uid != old.metadata.uid
    with pytest.raises(ApiError) as err:
        await cluster.client.bind(old, "n1")
    assert err.value.status == 409
    assert (await cluster.get_pod("p")).spec.node_name == ""


async def test_bind_of_a_missing_pod_is_not_found(cluster: Cluster) -> None:
    pod = await cluster.create_pod("p")
    await cluster.delete_pod("p")
    with pytest.raises(ApiError) as err:
        await cluster.client.bind(pod, "n1")
    assert err.value.status == 404


async def test_bind_survives_500s_then_succeeds(cluster: Cluster) -> None:
    pod = await cluster.create_pod("p")
    cluster.server.faults.fail("POST", r"/pods/p/binding$", 500, times=2)
    await cluster.client.bind(pod, "n1")
    assert (await cluster.get_pod("p")).spec.node_name == "n1"
    assert len(cluster.clock.sleeps) == 2


async def test_persistent_500s_give_up_within_the_bound(cluster: Cluster) -> None:
    pod = await cluster.create_pod("p")
    cluster.server.faults.fail("POST", r"/binding$", 500, times=-1)
    with pytest.raises(ApiError) as err:
        await cluster.client.bind(pod, "n1")
    assert err.value.status == 500
    assert len(cluster.clock.sleeps) == cluster.client.retry.max_attempts - 1


async def test_429_waits_the_retry_after_the_server_sent(cluster: Cluster) -> None:
    pod = await cluster.create_pod("p")
    cluster.server.faults.fail("POST", r"/binding$", 429, times=1, retry_after=3)
    await cluster.client.bind(pod, "n1")
    assert cluster.clock.sleeps == [3.0]
    assert (await cluster.get_pod("p")).spec.node_name == "n1"


# --- pod status ---------------------------------------------------------------------------


async def test_status_patch_merges_the_condition_by_type_and_sets_then_clears_nomination(
    cluster: Cluster,
) -> None:
    pod = await cluster.create_pod("p")
    unsched = PodCondition(
        type="PodScheduled", status="False", reason="Unschedulable", message="0/2 nodes"
    )
    await cluster.client.patch_pod_status(pod, unsched, "n7")
    seen = await cluster.get_pod("p")
    [cond] = [c for c in seen.status.conditions if c.type == "PodScheduled"]
    assert (cond.status, cond.reason, cond.message) == ("False", "Unschedulable", "0/2 nodes")
    assert cond.last_transition_time
    assert seen.status.nominated_node_name == "n7"

    newer = unsched.model_copy(update={"message": "0/3 nodes"})
    await cluster.client.patch_pod_status(seen, newer, "")
    seen = await cluster.get_pod("p")
    conds = [c for c in seen.status.conditions if c.type == "PodScheduled"]
    assert [c.message for c in conds] == ["0/3 nodes"]
    assert conds[0].last_transition_time == cond.last_transition_time
    assert seen.status.nominated_node_name == ""


async def test_status_patch_of_a_deleted_pod_is_ignored(cluster: Cluster) -> None:
    pod = await cluster.create_pod("p")
    await cluster.delete_pod("p")
    cond = PodCondition(type="PodScheduled", status="False", reason="Unschedulable")
    await cluster.client.patch_pod_status(pod, cond, None)


# --- events -------------------------------------------------------------------------------


async def test_events_are_created_valid_and_aggregated_into_a_series(cluster: Cluster) -> None:
    pod = await cluster.create_pod("p")
    failed = Event(
        ObjectRef.of_pod(pod),
        "Warning",
        "FailedScheduling",
        "Scheduling",
        "0/3 nodes are available: 3 Insufficient cpu.",
    )
    for _ in range(3):
        await cluster.client.record_event(failed)
    [event] = await cluster.events()
    assert event["regarding"]["uid"] == pod.metadata.uid
    assert event["reportingController"] == "troupe-scheduler"
    assert event["reportingInstance"] == "test-host"
    assert (event["type"], event["reason"], event["action"]) == (
        "Warning",
        "FailedScheduling",
        "Scheduling",
    )
    assert event["series"]["count"] == 2  # the third repeat waits for a flush
    assert cluster.client.events.counters.failed == 0


# --- informers ----------------------------------------------------------------------------


class Mirror:
    """A handler set that keeps its own copy and counts every call."""

    def __init__(self) -> None:
        self.pods: dict[str, str] = {}
        self.nodes: set[str] = set()
        self.adds: Counter[str] = Counter()
        self.updates = 0
        self.deletes: Counter[str] = Counter()

    def on_pod_add(self, pod: Pod) -> None:
        assert pod.key not in self.pods, f"{pod.key} added twice"
        self.adds[pod.metadata.uid] += 1
        self.pods[pod.key] = pod.metadata.resource_version

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        assert self.pods[old.key] == old.metadata.resource_version
        self.updates += 1
        self.pods[new.key] = new.metadata.resource_version

    def on_pod_delete(self, pod: Pod) -> None:
        self.deletes[pod.metadata.uid] += 1
        del self.pods[pod.key]

    def on_node_add(self, node: Node) -> None:
        self.nodes.add(node.metadata.name)

    def on_node_update(self, old: Node, new: Node) -> None:
        assert old.metadata.name in self.nodes

    def on_node_delete(self, node: Node) -> None:
        self.nodes.discard(node.metadata.name)


@pytest.fixture
async def watched(cluster: Cluster) -> AsyncIterator[tuple[SharedInformers, Mirror]]:
    mirror = Mirror()
    informers = SharedInformers(
        cluster.http,
        RealClock(),
        mirror,
        config=InformerConfig(watch_timeout=30.0, initial_backoff=0.2, max_backoff=0.5),
    )
    supervisor = TaskSupervisor("informers")
    informers.start(supervisor)
    assert await informers.wait_for_sync(5.0)
    yield informers, mirror
    informers.stop()
    assert await supervisor.drain(5.0)
    assert supervisor.failures == 0


async def test_informers_see_adds_updates_and_deletes(
    cluster: Cluster, watched: tuple[SharedInformers, Mirror]
) -> None:
    informers, mirror = watched
    assert informers.healthy
    await cluster.create_node("n1")
    pods = [await cluster.create_pod(f"p{i}") for i in range(3)]
    await cluster.client.bind(pods[0], "n1")
    await cluster.label_pod("p1", "x")
    await cluster.delete_pod("p2")
    server = await cluster.pods_on_server()
    await eventually(lambda: mirror.pods == server and mirror.nodes == {"n1"})
    assert mirror.updates >= 2 and sum(mirror.deletes.values()) == 1
    assert informers.pods.store[f"{NS}/p0"].spec.node_name == "n1"
    assert informers.priority_classes.has_synced


async def test_a_dropped_watch_loses_nothing_and_counts_nothing_twice(
    cluster: Cluster, watched: tuple[SharedInformers, Mirror]
) -> None:
    informers, mirror = watched
    for i in range(5):
        await cluster.create_pod(f"a{i}")
    await eventually(lambda: len(mirror.pods) == 5)
    assert cluster.server.faults.drop_watches() >= 3
    # Changes while the informers back off and reconnect from their last version.
    for i in range(5):
        await cluster.create_pod(f"b{i}")
    await cluster.label_pod("a0", "y")
    await cluster.delete_pod("a1")
    server = await cluster.pods_on_server()
    await eventually(lambda: mirror.pods == server)
    assert set(mirror.adds.values()) == {1}
    assert set(mirror.deletes.values()) == {1}
    assert informers.pods.counters.relists_on_gone == 0
    await eventually(lambda: informers.healthy)


async def test_compaction_forces_a_relist_that_reconciles_exactly(
    cluster: Cluster, watched: tuple[SharedInformers, Mirror]
) -> None:
    informers, mirror = watched
    for i in range(4):
        await cluster.create_pod(f"a{i}")
    await eventually(lambda: len(mirror.pods) == 4)
    cluster.server.faults.drop_watches()
    # While disconnected: an add, an update, a delete; then history is compacted away.
    await cluster.create_pod("late")
    await cluster.label_pod("a0", "z")
    await cluster.delete_pod("a1")
    cluster.server.faults.compact()
    server = await cluster.pods_on_server()
    await eventually(lambda: mirror.pods == server)
    assert informers.pods.counters.relists_on_gone >= 1
    assert set(mirror.adds.values()) == {1}
    assert sum(mirror.deletes.values()) == 1


async def test_informers_sync_after_the_server_fails_their_first_lists(cluster: Cluster) -> None:
    await cluster.create_pod("p")
    cluster.server.faults.fail("GET", r"^/api/v1/pods$", 500, times=2)
    mirror = Mirror()
    informers = SharedInformers(
        cluster.http,
        RealClock(),
        mirror,
        config=InformerConfig(initial_backoff=0.02, max_backoff=0.05),
    )
    supervisor = TaskSupervisor("informers")
    informers.start(supervisor)
    assert await informers.wait_for_sync(5.0)
    assert informers.pods.counters.failures == 2
    assert mirror.pods == await cluster.pods_on_server()
    informers.stop()
    assert await supervisor.drain(5.0)
