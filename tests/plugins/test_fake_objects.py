"""The plugin tests' in-memory object client answers as the API server does: 404 for a
missing object, 409 for an existing one or a stale resourceVersion, status writes
that leave the rest alone, merge patches."""

from __future__ import annotations

import pytest
from troupe.api.client import ApiError
from troupe.api.watches import PERSISTENT_VOLUME_CLAIMS, RESOURCE_CLAIMS

from tests.plugins.fakes import RecordingClient


async def test_the_fake_object_client_follows_the_servers_answers() -> None:
    c = RecordingClient()
    claim = {"metadata": {"name": "gpu", "namespace": "ml"}, "spec": {"devices": {}}}
    created = await c.create_object(RESOURCE_CLAIMS, claim)
    assert created["metadata"]["resourceVersion"] == "1"
    with pytest.raises(ApiError) as exists:
        await c.create_object(RESOURCE_CLAIMS, claim)
    assert exists.value.is_conflict
    read = await c.get_object(RESOURCE_CLAIMS, "gpu", "ml")
    read["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    await c.update_object(RESOURCE_CLAIMS, read)
    with pytest.raises(ApiError) as stale:
        await c.update_object(RESOURCE_CLAIMS, read)
    assert stale.value.is_conflict
    fresh = await c.get_object(RESOURCE_CLAIMS, "gpu", "ml")
    fresh["status"] = {"reservedFor": [{"resource": "pods", "name": "p"}]}
    fresh["spec"] = {"changed": True}
    stored = await c.update_object_status(RESOURCE_CLAIMS, fresh)
    assert stored["spec"] == {"devices": {}} and stored["status"]["reservedFor"][0]["name"] == "p"
    assert stored["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    with pytest.raises(ApiError) as missing:
        await c.patch_object(PERSISTENT_VOLUME_CLAIMS, "data", {}, namespace="ml")
    assert missing.value.is_not_found
    await c.create_object(PERSISTENT_VOLUME_CLAIMS, {"metadata": {"name": "d", "namespace": "ml"}})
    patched = await c.patch_object(
        PERSISTENT_VOLUME_CLAIMS,
        "d",
        {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n1"}}},
        namespace="ml",
    )
    assert patched["metadata"]["annotations"] == {"volume.kubernetes.io/selected-node": "n1"}
    assert c.writes == [
        ("create", "ResourceClaim ml/gpu"),
        ("update", "ResourceClaim ml/gpu"),
        ("update status", "ResourceClaim ml/gpu"),
        ("create", "PersistentVolumeClaim ml/d"),
        ("patch", "PersistentVolumeClaim ml/d"),
    ]
