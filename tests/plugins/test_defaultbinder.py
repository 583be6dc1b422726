"""DefaultBinder: binds through the client; API errors become ERROR statuses."""

from __future__ import annotations

from troupe.api.client import ApiError
from troupe.api.cycle import CycleState
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code
from troupe.plugins.defaultbinder import DefaultBinder

from tests.plugins.builders import make_pod
from tests.plugins.fakes import FakeHandle


async def test_binding_posts_the_pod_to_the_node() -> None:
    handle = FakeHandle()
    status = await DefaultBinder(None, handle).bind(
        CycleState(), PodInfo.of(make_pod().name("p").namespace("ns").obj()), "n1"
    )
    assert status.is_success
    assert handle.client.bindings == [("ns/p", "n1")]


async def test_a_rejected_binding_is_an_error_naming_the_plugin() -> None:
    handle = FakeHandle()
    handle.client.fail_with = ApiError(409, "pod ns/p is already assigned to node n2")
    status = await DefaultBinder(None, handle).bind(
        CycleState(), PodInfo.of(make_pod().obj()), "n1"
    )
    assert status.code is Code.ERROR
    assert status.plugin == "DefaultBinder"
    assert status.message == "409: pod ns/p is already assigned to node n2"
    assert isinstance(status.error, ApiError) and status.error.is_conflict
