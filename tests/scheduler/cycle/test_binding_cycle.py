"""The binding cycle's error paths: PostBind failures, failed-binding statistics,
and Permit rejections releasing capacity."""

from __future__ import annotations

import asyncio
import time

import pytest
from troupe.api.client import ApiError
from troupe.api.cycle import CycleState
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import SUCCESS, Code, Status
from troupe.plugins.registry import PluginSpec, Registry, default_registry

from tests.plugins.builders import make_node, make_pod
from tests.scheduler.harness import Harness


def node(name: str, cpu: str = "4"):
    return make_node().name(name).capacity(cpu=cpu, memory="8Gi", pods=110)


def pod(name: str, cpu: str = "1"):
    return make_pod().name(name).uid(name).req(cpu=cpu).scheduler_name("troupe-scheduler")


def registry_with(*plugins: type) -> Registry:
    registry = default_registry()
    for cls in plugins:
        registry.register(PluginSpec(cls.name, lambda a, h, c=cls: c(), None, cls))  # type: ignore[attr-defined]
    return registry


def harness(point: str, *plugins: type) -> Harness:
    enabled = [{"name": cls.name} for cls in plugins]  # type: ignore[attr-defined]
    return Harness(
        {"profiles": [{"plugins": {point: {"enabled": enabled}}}]},
        registry=registry_with(*plugins),
    )


class _BrokenPostBind:
    name = "BrokenPostBind"

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        raise RuntimeError("audit log unavailable")


class _CountingPostBind:
    name = "CountingPostBind"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.seen.append(pod.key)


async def test_a_raising_postbind_plugin_does_not_undo_a_successful_binding() -> None:
    h = harness("postBind", _BrokenPostBind, _CountingPostBind).nodes([node("n1").obj()])
    h.pods([pod("p").obj()])
    await h.settle()
    assert h.client.bindings == [("default/p", "n1")]
    # The rest of the binding cycle ran: later PostBind plugins, event, statistics.
    counting = h.parts.profiles["troupe-scheduler"].plugins["CountingPostBind"]
    assert counting.seen == ["default/p"]  # type: ignore[attr-defined]
    (event,) = h.client.events_for("default/p", "Scheduled")
    assert event.note == "Successfully assigned default/p to n1"
    assert h.scheduler.stats.results["scheduled"] == 1
    assert h.scheduler.bindings.failures == 0
    assert h.scheduler.cache.is_assumed("default/p") is False
    await h.close()


@pytest.mark.parametrize(
    ("error", "result"),
    [
        pytest.param(ApiError(500, "etcd timeout"), "error", id="server error"),
        pytest.param(ApiError(409, "already bound"), "error", id="conflict"),
    ],
)
async def test_a_failed_binding_records_how_long_the_attempt_took(
    error: ApiError, result: str
) -> None:
    h = Harness().nodes([node("n1").obj()])
    attempts: list[tuple[str, float]] = []
    h.scheduler.stats.hooks.append(lambda r, profile, seconds: attempts.append((r, seconds)))
    h.client.bind_errors["default/p"] = [error]
    bind_call: list[float] = []
    recorded_bind = h.client.bind

    async def timed_bind(p: Pod, node_name: str) -> None:
        start = time.perf_counter()
        try:
            await recorded_bind(p, node_name)
        finally:
            bind_call.append(time.perf_counter() - start)

    h.client.bind = timed_bind  # type: ignore[method-assign]
    h.pods([pod("p").obj()])
    await h.settle()
    ((recorded, seconds),) = attempts
    assert recorded == result
    # From the start of the scheduling cycle to the failure, the Bind call included.
    assert seconds >= bind_call[0] > 0
    await h.close()


class _GatekeeperPermit:
    """Holds pods labelled ``wait`` at Permit; lets the others through."""

    name = "GatekeeperPermit"

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        if pod.pod.metadata.labels.get("wait"):
            return Status(Code.WAIT), 30.0
        return SUCCESS, 0.0


async def test_a_pod_rejected_at_permit_releases_its_node_while_all_slots_are_busy() -> None:
    h = Harness(
        {
            "bindingConcurrency": 1,
            "profiles": [{"plugins": {"permit": {"enabled": [{"name": "GatekeeperPermit"}]}}}],
        },
        registry=registry_with(_GatekeeperPermit),
    ).nodes([node("n1", cpu="2").obj()])
    # The only binding slot is taken by a binding the API server is slow to answer.
    answer = asyncio.Event()
    recorded_bind = h.client.bind

    async def slow_bind(p: Pod, node_name: str) -> None:
        await answer.wait()
        await recorded_bind(p, node_name)

    h.client.bind = slow_bind  # type: ignore[method-assign]
    h.pods([pod("slow").obj(), pod("held").label("wait", "yes").obj()])
    while h.scheduler.queue.pending_counts()["active"]:
        await h.scheduler.schedule_one()
    waiting = h.scheduler.waiting.get("default/held")
    assert waiting is not None
    waiting.reject("GatekeeperPermit", "gang timed out")
    for _ in range(10):
        await asyncio.sleep(0)
    # Released at once, though the slow binding still holds the only slot.
    assert "default/held" not in h.scheduler.cache
    assert h.scheduler.cache.table.requested[0, h.scheduler.cache.table.index["n1"]] == 1000
    assert h.client.conditions["default/held"].message == "gang timed out"
    answer.set()
    await h.settle()
    assert h.client.bindings == [("default/slow", "n1")]
    await h.close()
