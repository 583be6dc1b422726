"""The generic object client: exact requests, what is retried, what raises, and that
every write is rate-limited and fenced like the scheduler's own; then the same calls
against the embedded API server (conflicts, not found, the three patch types, status)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from troupe.api.client import ApiError, PatchType, WriteFenced
from troupe.api.clock import FakeClock
from troupe.api.watches import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, ObjectKind
from troupe.kube import KubeClient, RetryPolicy, check_reachable, connect
from troupe.kube.fence import FencedTransport, WriteFence
from troupe.kube.object_client import object_path
from troupe.sim.apiserver.server import ApiServer

from tests.kube.fakes import FakeTransport, reply, status_body
from tests.kube.test_client import client

CONFIG_MAPS = ObjectKind("", "v1", "configmaps", "ConfigMap", True)
CLAIMS = ObjectKind("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)
PVC = "/api/v1/namespaces/ns/persistentvolumeclaims/data"


@pytest.mark.parametrize(
    ("kind", "name", "namespace", "sub", "path"),
    [
        (PERSISTENT_VOLUME_CLAIMS, "", "ns", "", "/api/v1/namespaces/ns/persistentvolumeclaims"),
        (PERSISTENT_VOLUME_CLAIMS, "data", "ns", "", PVC),
        (PERSISTENT_VOLUMES, "pv-1", "", "", "/api/v1/persistentvolumes/pv-1"),
        (
            CLAIMS,
            "gpu",
            "ml",
            "status",
            "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/gpu/status",
        ),
    ],
)
def test_object_paths(kind: ObjectKind, name: str, namespace: str, sub: str, path: str) -> None:
    assert object_path(kind, name, namespace, sub) == path


def test_a_namespace_that_does_not_fit_the_scope_is_refused_naming_the_object() -> None:
    with pytest.raises(ValueError, match=r"PersistentVolumeClaim data: metadata\.namespace is"):
        object_path(PERSISTENT_VOLUME_CLAIMS, "data")
    with pytest.raises(ValueError, match=r"PersistentVolume ns/pv-1: .* is cluster-scoped"):
        object_path(PERSISTENT_VOLUMES, "pv-1", "ns")


async def test_get_reads_the_object_and_a_missing_one_is_not_found() -> None:
    t = FakeTransport()
    t.script("GET", PVC, reply(200, {"metadata": {"name": "data"}}), reply(404))
    c = client(t)
    assert await c.get_object(PERSISTENT_VOLUME_CLAIMS, "data", "ns") == {
        "metadata": {"name": "data"}
    }
    with pytest.raises(ApiError) as err:
        await c.get_object(PERSISTENT_VOLUME_CLAIMS, "data", "ns")
    assert err.value.is_not_found


async def test_create_posts_to_the_collection_with_api_version_and_kind() -> None:
    t = FakeTransport()
    t.script("POST", "/api/v1/namespaces/ns/configmaps", reply(201, {"metadata": {"uid": "u"}}))
    created = await client(t).create_object(
        CONFIG_MAPS, {"metadata": {"name": "c", "namespace": "ns"}, "data": {"a": "1"}}
    )
    assert created == {"metadata": {"uid": "u"}}
    [sent] = t.sent
    assert sent.json() == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns"},
        "data": {"a": "1"},
    }


async def test_update_puts_the_object_where_its_metadata_names_it() -> None:
    t = FakeTransport()
    path = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/gpu"
    t.script("PUT", path, reply(200, {"ok": 1}))
    t.script("PUT", path + "/status", reply(200, {"ok": 2}))
    c = client(t)
    claim = {"metadata": {"name": "gpu", "namespace": "ml", "resourceVersion": "7"}}
    assert await c.update_object(CLAIMS, claim) == {"ok": 1}
    assert await c.update_object_status(CLAIMS, claim) == {"ok": 2}
    assert [s.path for s in t.sent] == [path, path + "/status"]
    assert t.sent[0].json()["metadata"]["resourceVersion"] == "7"
    with pytest.raises(ValueError, match=r"ResourceClaim: metadata\.name is required"):
        await c.update_object(CLAIMS, {"metadata": {"namespace": "ml"}})


@pytest.mark.parametrize(
    ("patch_type", "patch"),
    [
        (PatchType.MERGE, {"metadata": {"annotations": {"a": "b"}}}),
        (PatchType.STRATEGIC, {"metadata": {"finalizers": ["f"]}}),
        (PatchType.JSON, [{"op": "add", "path": "/metadata/labels/x", "value": "y"}]),
    ],
)
async def test_patch_sends_the_patch_type_as_content_type(
    patch_type: PatchType, patch: Any
) -> None:
    t = FakeTransport()
    t.script("PATCH", PVC, reply(200, {"patched": True}))
    got = await client(t).patch_object(
        PERSISTENT_VOLUME_CLAIMS, "data", patch, namespace="ns", patch_type=patch_type
    )
    assert got == {"patched": True}
    [sent] = t.sent
    assert (sent.content_type, sent.json()) == (patch_type.value, patch)


async def test_a_patch_of_the_wrong_shape_is_refused_before_it_is_sent() -> None:
    t = FakeTransport()
    with pytest.raises(ValueError, match="a JSON patch is a list of operations"):
        await client(t).patch_object(
            PERSISTENT_VOLUME_CLAIMS, "data", {"a": 1}, namespace="ns", patch_type=PatchType.JSON
        )
    assert t.sent == []


@pytest.mark.parametrize(
    ("replies", "check", "attempts"),
    [
        ([reply(409, status_body(409, "the object has been modified", "Conflict"))], "conflict", 1),
        ([reply(404, status_body(404, "not found", "NotFound"))], "not_found", 1),
        ([reply(503)] * 3, "transient", 3),
    ],
    ids=["a conflict raises at once", "not found raises at once", "5xx is retried"],
)
async def test_write_failures_raise_api_errors(
    replies: list[Any], check: str, attempts: int
) -> None:
    t = FakeTransport()
    t.script("PATCH", PVC, *replies)
    with pytest.raises(ApiError) as err:
        await client(t).patch_object(PERSISTENT_VOLUME_CLAIMS, "data", {}, namespace="ns")
    assert getattr(err.value, f"is_{check}")
    assert len(t.sent) == attempts


async def test_a_transient_failure_is_retried_then_succeeds() -> None:
    t = FakeTransport()
    t.script("PUT", PVC, reply(500), reply(200, {"done": True}))
    obj = {"metadata": {"name": "data", "namespace": "ns"}}
    assert await client(t).update_object(PERSISTENT_VOLUME_CLAIMS, obj) == {"done": True}
    assert len(t.sent) == 2


async def test_object_writes_wait_for_the_qps_limiter() -> None:
    t = FakeTransport()
    clock = FakeClock()
    c = client(t, clock, qps=2.0, burst=1)
    first = asyncio.create_task(c.patch_object(PERSISTENT_VOLUME_CLAIMS, "a", {}, namespace="ns"))
    second = asyncio.create_task(c.patch_object(PERSISTENT_VOLUME_CLAIMS, "b", {}, namespace="ns"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert first.done() and not second.done()
    clock.advance(0.5)
    await second
    assert len(t.sent) == 2


async def test_without_the_lease_no_object_write_leaves_but_reads_do() -> None:
    t = FakeTransport()
    t.script("GET", PVC, reply(200, {}))
    c = KubeClient(
        FencedTransport(t, WriteFence(FakeClock())),  # never opened: no lease
        FakeClock(),
        qps=-1,
        burst=10,
        scheduler_name="troupe-scheduler",
        instance="standby",
    )
    obj = {"metadata": {"name": "data", "namespace": "ns"}}
    with pytest.raises(WriteFenced):
        await c.patch_object(PERSISTENT_VOLUME_CLAIMS, "data", {}, namespace="ns")
    with pytest.raises(WriteFenced):
        await c.update_object_status(PERSISTENT_VOLUME_CLAIMS, obj)
    with pytest.raises(WriteFenced):
        await c.create_object(PERSISTENT_VOLUME_CLAIMS, obj)
    assert await c.get_object(PERSISTENT_VOLUME_CLAIMS, "data", "ns") == {}
    assert [s.method for s in t.sent] == ["GET"]


# --- against the embedded API server ----------------------------------------------------


@pytest.fixture
async def api_client(tmp_path: Path) -> AsyncIterator[KubeClient]:
    server = ApiServer()
    await server.start()
    api = await connect(str(server.write_kubeconfig(tmp_path / "kubeconfig")), None, False)
    await check_reachable(api)
    c = KubeClient(
        api,
        FakeClock(),
        qps=-1,
        burst=100,
        scheduler_name="troupe-scheduler",
        instance="test-host",
        retry=RetryPolicy(max_attempts=2, initial_backoff=0.0, max_backoff=0.0),
    )
    try:
        yield c
    finally:
        await api.close()
        await server.stop()


async def test_create_get_update_and_a_stale_update_is_a_conflict(api_client: KubeClient) -> None:
    c = api_client
    claim = {
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    created = await c.create_object(PERSISTENT_VOLUME_CLAIMS, claim)
    with pytest.raises(ApiError) as exists:
        await c.create_object(PERSISTENT_VOLUME_CLAIMS, claim)
    assert exists.value.is_conflict
    read = await c.get_object(PERSISTENT_VOLUME_CLAIMS, "data", "default")
    assert read["metadata"]["uid"] == created["metadata"]["uid"]
    read["metadata"].setdefault("annotations", {})["volume.kubernetes.io/selected-node"] = "n1"
    updated = await c.update_object(PERSISTENT_VOLUME_CLAIMS, read)
    assert updated["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "n1"
    with pytest.raises(ApiError) as stale:
        await c.update_object(PERSISTENT_VOLUME_CLAIMS, read)  # read's resourceVersion is old
    assert stale.value.is_conflict
    with pytest.raises(ApiError) as missing:
        await c.get_object(PERSISTENT_VOLUME_CLAIMS, "nope", "default")
    assert missing.value.is_not_found


async def test_status_is_written_through_its_subresource(api_client: KubeClient) -> None:
    c = api_client
    pv = {
        "metadata": {"name": "pv-1"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]},
    }
    await c.create_object(PERSISTENT_VOLUMES, pv)
    read = await c.get_object(PERSISTENT_VOLUMES, "pv-1")
    read["status"] = {"phase": "Available"}
    read["spec"]["storageClassName"] = "ignored-by-status"
    written = await c.update_object_status(PERSISTENT_VOLUMES, read)
    assert written["status"]["phase"] == "Available"
    # A status write leaves the spec alone.
    assert "storageClassName" not in written["spec"]


async def test_the_three_patch_types(api_client: KubeClient) -> None:
    c = api_client
    await c.create_object(CONFIG_MAPS, {"metadata": {"name": "c", "namespace": "default"}})
    merged = await c.patch_object(
        CONFIG_MAPS, "c", {"metadata": {"labels": {"a": "1"}}}, namespace="default"
    )
    assert merged["metadata"]["labels"] == {"a": "1"}
    strategic = await c.patch_object(
        CONFIG_MAPS,
        "c",
        {"metadata": {"finalizers": ["troupe.test/keep"]}},
        namespace="default",
        patch_type=PatchType.STRATEGIC,
    )
    assert strategic["metadata"]["finalizers"] == ["troupe.test/keep"]
    ops = [{"op": "add", "path": "/data", "value": {"k": "v"}}]
    patched = await c.patch_object(
        CONFIG_MAPS, "c", ops, namespace="default", patch_type=PatchType.JSON
    )
    assert patched["data"] == {"k": "v"}
    assert json.dumps(patched)  # a plain JSON object
