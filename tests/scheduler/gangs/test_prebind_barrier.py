"""The gang PreBind barrier: an admitted gang binds no member until every member's
PreBind has succeeded; one failure unreserves them all (last placed first), binds
nothing, and the gang is retried (docs/gangs.md, "What troupe guarantees")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from troupe.api.cycle import CycleState
from troupe.api.gangs import GangApi
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.plugins.registry import PluginSpec, default_registry

from tests.plugins.builders import make_node
from tests.scheduler.gang_helpers import coscheduling_group, member
from tests.scheduler.harness import Harness


class Barrier:
    """Logs Reserve, Unreserve, each PreBind as it ends and each Bind as it starts
    (then SKIPs, leaving the bind to DefaultBinder). PreBind of a member in ``gates``
    waits for its gate; PreBind of a member in ``fail`` fails that many times."""

    name = "Barrier"

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.fail: dict[str, int] = {}

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.log.append(("reserve", pod.key))
        return Status()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.log.append(("unreserve", pod.key))

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        gate = self.gates.get(pod.key)
        if gate is not None:
            await gate.wait()
        if self.fail.get(pod.key, 0) > 0:
            self.fail[pod.key] -= 1
            self.log.append(("prebind-failed", pod.key))
            return Status.unschedulable("volume not attachable yet")
        self.log.append(("prebind", pod.key))
        return Status()

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.log.append(("bind", pod.key))
        return Status(Code.SKIP)

    def steps(self, step: str) -> list[str]:
        return [key for s, key in self.log if s == step]


def harness(plugin: Barrier, **config: Any) -> Harness:
    registry = default_registry()
    registry.register(PluginSpec(plugin.name, lambda a, h: plugin, None, Barrier))
    plugins = {
        "reserve": {"enabled": [{"name": "Barrier"}]},
        "preBind": {"enabled": [{"name": "Barrier"}]},
        "bind": {
            "enabled": [{"name": "Barrier"}, {"name": "DefaultBinder"}],
            "disabled": [{"name": "*"}],
        },
    }
    h = Harness({"profiles": [{"plugins": plugins}], **config}, registry=registry)
    return h.nodes(
        make_node().name(f"n{i}").capacity(cpu="2", memory="8Gi", pods=110).obj() for i in range(3)
    )


def gang(h: Harness, size: int) -> None:
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("train", size))
    h.pods(member("train", i) for i in range(size))


async def spin(times: int = 20) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


@pytest.mark.parametrize("slots", [1, 16])
async def test_no_member_is_bound_before_every_member_s_prebind_succeeded(slots: int) -> None:
    plugin = Barrier()
    h = harness(plugin, bindingConcurrency=slots)
    plugin.gates["default/train-2"] = asyncio.Event()
    gang(h, 3)
    await h.scheduler.schedule_one()
    await spin()
    # Two PreBinds are done; the third waits for its volume: nothing binds.
    assert sorted(plugin.steps("prebind")) == ["default/train-0", "default/train-1"]
    assert plugin.steps("bind") == [] and h.client.bindings == []
    plugin.gates["default/train-2"].set()
    await h.settle()
    await spin()
    assert len(h.client.bindings) == 3
    last_prebind = max(i for i, (s, _) in enumerate(plugin.log) if s == "prebind")
    first_bind = min(i for i, (s, _) in enumerate(plugin.log) if s == "bind")
    assert last_prebind < first_bind
    await h.close()


async def test_a_failed_prebind_unreserves_every_member_binds_none_and_retries_the_gang() -> None:
    plugin = Barrier()
    h = harness(plugin)
    plugin.fail["default/train-1"] = 1
    gang(h, 3)
    await h.settle()
    await spin()
    assert h.client.bindings == [] and plugin.steps("bind") == []
    # Every member is unreserved, the last placed first, and forgotten.
    assert plugin.steps("unreserve") == plugin.steps("reserve")[::-1]
    assert len(plugin.steps("unreserve")) == 3
    assert h.scheduler.cache.assumed_count == 0
    message = h.client.conditions["default/train-0"].message
    assert "PreBind of default/train-1 failed (" in message and "retried" in message
    # Retried after the group's backoff: PreBind succeeds now, and the gang binds.
    await h.advance(20)
    await h.settle()
    await spin()
    assert sorted(k for k, _ in h.client.bindings) == [f"default/train-{i}" for i in range(3)]
    await h.close()
