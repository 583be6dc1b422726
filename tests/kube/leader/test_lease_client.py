"""KubeClient's Lease calls: paths, bodies, and one request per call (no retries); the
Lease watch against the embedded API server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from troupe.api.client import ApiError
from troupe.api.clock import FakeClock, RealClock
from troupe.kube import connect
from troupe.kube.client import KubeClient
from troupe.sim.apiserver.server import ApiServer

from tests.integration.conftest import eventually
from tests.kube.fakes import FakeTransport, reply

PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/troupe"
LEASE: dict[str, Any] = {
    "metadata": {"name": "troupe", "namespace": "kube-system", "resourceVersion": "7"},
    "spec": {"holderIdentity": "a"},
}


def client(transport: FakeTransport) -> KubeClient:
    return KubeClient(transport, FakeClock(), qps=1, burst=1, scheduler_name="s", instance="i")


async def test_a_missing_lease_reads_as_none() -> None:
    t = FakeTransport()
    t.script("GET", PATH, reply(404))
    assert await client(t).get_lease("kube-system", "troupe", timeout=1) is None


async def test_create_posts_to_the_collection_and_update_puts_with_the_resource_version() -> None:
    t = FakeTransport()
    t.script("POST", PATH.rsplit("/", 1)[0], reply(201, LEASE))
    t.script("PUT", PATH, reply(200, LEASE))
    c = client(t)
    assert await c.create_lease("kube-system", LEASE, timeout=1) == LEASE
    assert await c.update_lease("kube-system", "troupe", LEASE, timeout=1) == LEASE
    assert [(s.method, s.json()["metadata"]["resourceVersion"]) for s in t.sent] == [
        ("POST", "7"),
        ("PUT", "7"),
    ]


@pytest.mark.parametrize(
    ("status", "conflict"),
    [
        pytest.param(409, True, id="a stale resourceVersion raises a conflict"),
        pytest.param(503, False, id="a server error raises at once, without a retry"),
    ],
)
async def test_a_failed_update_raises_after_one_request(status: int, conflict: bool) -> None:
    t = FakeTransport()
    t.script("PUT", PATH, reply(status), reply(200, LEASE))
    with pytest.raises(ApiError) as caught:
        await client(t).update_lease("kube-system", "troupe", LEASE, timeout=1)
    assert (caught.value.status, caught.value.is_conflict) == (status, conflict)
    assert len(t.sent) == 1


async def test_the_lease_watch_sees_its_lease_change_and_go_and_no_other(tmp_path: Path) -> None:
    server = ApiServer(bookmark_interval=0.2)
    await server.start()
    audit = server.start_audit()
    api = await connect(str(server.write_kubeconfig(tmp_path / "kubeconfig")), None, False)
    leases = "leases.coordination.k8s.io"

    def lease(name: str, holder: str) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
        }

    seen: list[dict[str, Any] | None] = []
    server.store.create(leases, lease("troupe", "a"))
    server.store.create(leases, lease("kube-scheduler", "x"))
    c = KubeClient(api, RealClock(), qps=1, burst=1, scheduler_name="s", instance="i")
    watch = asyncio.create_task(
        c.watch_lease(
            "kube-system", "troupe", lambda obj: seen.append(None if obj is None else dict(obj))
        )
    )
    try:
        await eventually(lambda: len(seen) == 1, timeout=10, what="the first list")
        stored = server.store.get(leases, "troupe", "kube-system")
        stored["spec"].update(holderIdentity="b", leaseDurationSeconds="abc")
        server.store.update(leases, stored)
        other = server.store.get(leases, "kube-scheduler", "kube-system")
        other["spec"]["holderIdentity"] = "y"
        server.store.update(leases, other)
        server.store.delete(leases, "troupe", "kube-system")
        await eventually(lambda: len(seen) == 3, timeout=10, what="the edit and the deletion")
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
        await api.close()
        await server.stop()
    first, edited, deleted = seen
    assert first is not None and edited is not None
    assert (first["metadata"]["name"], first["spec"]["holderIdentity"]) == ("troupe", "a")
    assert edited["spec"] == {"holderIdentity": "b", "leaseDurationSeconds": "abc"}
    assert int(edited["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert deleted is None
    reads = [r.path for r in audit if r.method == "GET"]
    assert reads and set(reads) == {"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"}
