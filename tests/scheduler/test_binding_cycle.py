"""The binding cycle's error paths: PostBind failures, failed-binding statistics,
and Permit rejections releasing capacity."""

from __future__ import annotations

from troupe.api.cycle import CycleState
from troupe.api.podinfo import PodInfo
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
    counting = h.scheduler.frameworks["troupe-scheduler"].plugins["CountingPostBind"]
    assert counting.seen == ["default/p"]  # type: ignore[attr-defined]
    (event,) = h.client.events_for("default/p", "Scheduled")
    assert event.note == "Successfully assigned default/p to n1"
    assert h.scheduler.stats.results["scheduled"] == 1
    assert h.scheduler.bindings.failures == 0
    assert h.scheduler.cache.is_assumed("default/p") is False
    await h.close()
