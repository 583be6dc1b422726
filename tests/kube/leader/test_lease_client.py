"""KubeClient's Lease calls: paths, bodies, and one request per call (no retries)."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.client import ApiError
from troupe.api.clock import FakeClock
from troupe.kube.client import KubeClient

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
