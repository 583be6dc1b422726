"""PreFilterExtensions (upstream AddPod / RemovePod) in preemption's simulation: a
plugin that keeps per-pod state in CycleState, from a cache of its own rather than
the NodeTable, is told of the victims taken off, by pod preemption
(DefaultPreemption's PostFilter, through the Handle) and by gang preemption (the
group victim search), and of nominated pods added for a Filter check."""

from __future__ import annotations

import numpy as np
from troupe.api.cycle import CycleState, StateKey
from troupe.api.framework import FilterResult, PreFilterResult
from troupe.api.gangs import POD_GROUP_LABEL, GangApi
from troupe.api.nodetable import NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status
from troupe.plugins.registry import PluginSpec, default_registry

from tests.plugins.preemption_helpers import node, pending, running
from tests.scheduler.gang_helpers import coscheduling_group
from tests.scheduler.harness import Harness

TAKEN = StateKey[dict[str, int]]("Licenses/taken")


class Licenses:
    """One license per node. Which pods hold one it knows from its own records
    (``holders``, as an informer of its own would keep them), not from the NodeTable:
    so only RemovePod can tell it that a holder is gone in a simulation."""

    name = "Licenses"

    def __init__(self) -> None:
        self.holders: dict[str, str] = {}  # pod key -> node
        self.removed: list[str] = []
        self.added: list[str] = []

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        taken: dict[str, int] = {}
        for node_name in self.holders.values():
            taken[node_name] = taken.get(node_name, 0) + 1
        state.write(TAKEN, taken)
        return None, Status()

    def add_pod(self, state: CycleState, pod: PodInfo, added: PodInfo, node: str) -> Status:
        self.added.append(added.key)
        taken = state.read(TAKEN)
        taken[node] = taken.get(node, 0) + 1
        return Status()

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: PodInfo, node: str) -> Status:
        if removed.key in self.holders:
            self.removed.append(removed.key)
            taken = state.read(TAKEN)
            taken[node] = taken.get(node, 0) - 1
        return Status()

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        taken = state.read(TAKEN)
        free = np.array([taken.get(name, 0) < 1 for name in table.names], dtype=bool)
        return FilterResult.masked(free, "node(s) had no free license")


def harness(plugin: Licenses, nodes: list[str]) -> Harness:
    registry = default_registry()
    registry.register(PluginSpec(plugin.name, lambda a, h: plugin, None, Licenses))
    points = {p: {"enabled": [{"name": plugin.name}]} for p in ("preFilter", "filter")}
    h = Harness({"profiles": [{"plugins": points}]}, registry=registry)
    return h.nodes([node(n).obj() for n in nodes])


async def test_pod_preemption_tells_the_plugin_of_each_victim_it_takes_off() -> None:
    plugin = Licenses()
    h = harness(plugin, ["n1"])
    low = running("low", "n1", priority=0)
    plugin.holders["default/low"] = "n1"
    h.pods([low, pending("high", cpu="1", priority=100).obj()])
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    # Without RemovePod the license would still look taken: no victim would help.
    assert "default/low" in plugin.removed
    assert h.client.deletions == ["default/low"]
    await h.close()


async def test_gang_preemption_tells_the_plugin_of_the_victims_its_search_takes_off() -> None:
    plugin = Licenses()
    h = harness(plugin, ["n1", "n2"])
    lows = [running(f"low-{n}", n, priority=0) for n in ("n1", "n2")]
    for n in ("n1", "n2"):
        plugin.holders[f"default/low-{n}"] = n
    h.pods(lows)
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("g", 2))
    h.pods(
        pending(f"g-{i}", cpu="1", priority=100).label(POD_GROUP_LABEL, "g").obj() for i in range(2)
    )
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    # The search took both off; the plugin counts no license for its own members,
    # so one freed license holds the gang and the other holder is reprieved.
    assert {"default/low-n1", "default/low-n2"} <= set(plugin.removed)
    assert len(h.client.deletions) == 1
    assert h.client.deletions[0] in {"default/low-n1", "default/low-n2"}
    await h.close()


async def test_a_nominated_pod_added_for_a_filter_check_is_told_to_the_plugin() -> None:
    plugin = Licenses()
    h = harness(plugin, ["n1"])
    plugin.holders["default/low"] = "n1"
    h.pods([running("low", "n1", priority=0), pending("high", cpu="1", priority=100).obj()])
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    # "high" preempted and is nominated to n1; a pod of equal priority must leave it
    # that room: the license the nominated pod will take is told to the plugin.
    assert h.client.deletions == ["default/low"]
    h.handlers.on_pod_delete(low_pod := running("low", "n1", priority=0))
    del plugin.holders[low_pod.key]
    h.pods([pending("other", cpu="1", priority=100).obj()])
    await h.settle()
    assert "default/high" in plugin.added
    await h.close()
