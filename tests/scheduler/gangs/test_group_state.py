"""Group-scoped plugin state: the members of one pod-group attempt share
``CycleState.group``, so a plugin can count what its Reserve set aside for earlier
members of the same attempt (upstream's pending allocations); it ends with the
attempt, admitted or reverted."""

from __future__ import annotations

import numpy as np
from troupe.api.cycle import CycleState, GroupState, StateKey
from troupe.api.framework import FilterResult
from troupe.api.gangs import GangApi
from troupe.api.nodetable import NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status
from troupe.plugins.registry import PluginSpec, default_registry

from tests.plugins.builders import make_node, make_pod
from tests.scheduler.gang_helpers import coscheduling_group, member
from tests.scheduler.harness import Harness

PENDING = StateKey[set[str]]("OneDevicePerNode/pending")


class OneDevicePerNode:
    """Each node has one device; a pod takes it. Devices set aside for earlier members
    of the same group attempt are kept in the attempt's shared area (nothing in the
    NodeTable says so), so the next member must not get the same node."""

    name = "OneDevicePerNode"

    def __init__(self) -> None:
        self.groups: list[GroupState | None] = []
        self.unreserved: list[str] = []
        self.taken: dict[str, str] = {}

    def _pending(self, state: CycleState) -> set[str]:
        group = state.group
        if group is None:
            return set()
        pending = group.get(PENDING)
        if pending is None:
            pending = set()
            group.write(PENDING, pending)
        return pending

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        busy = self._pending(state) | set(self.taken.values())
        feasible = np.array([name not in busy for name in table.names], dtype=bool)
        return FilterResult.masked(feasible, "node(s) had no free device")

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.groups.append(state.group)
        self._pending(state).add(node_name)
        return Status()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.unreserved.append(pod.key)
        if state.group is not None:
            self._pending(state).discard(node_name)

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.taken[pod.key] = node_name


def harness(plugin: OneDevicePerNode, nodes: int) -> Harness:
    registry = default_registry()
    registry.register(PluginSpec(plugin.name, lambda a, h: plugin, None, OneDevicePerNode))
    points = {p: {"enabled": [{"name": plugin.name}]} for p in ("filter", "reserve", "postBind")}
    h = Harness({"profiles": [{"plugins": points}]}, registry=registry)
    return h.nodes(
        make_node().name(f"n{i}").capacity(cpu="4", memory="8Gi", pods=110).obj()
        for i in range(nodes)
    )


async def test_members_of_one_attempt_see_what_reserve_set_aside_for_the_earlier_ones() -> None:
    plugin = OneDevicePerNode()
    h = harness(plugin, nodes=3)
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("train", 3))
    h.pods(member("train", i) for i in range(3))
    await h.settle()
    # One device each: three nodes, although each node has CPU for all three.
    assert sorted(n for _, n in h.client.bindings) == ["n0", "n1", "n2"]
    assert len({id(g) for g in plugin.groups}) == 1  # one area, shared by every member
    assert all(g is not None for g in plugin.groups)
    # The attempt ended: nothing it kept outlives it.
    assert all(g is not None and g.get(PENDING) is None for g in plugin.groups)
    await h.close()


async def test_a_reverted_attempt_takes_back_its_pending_devices_and_ends_its_area() -> None:
    plugin = OneDevicePerNode()
    h = harness(plugin, nodes=3)
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("train", 4))
    h.pods(member("train", i) for i in range(4))
    await h.settle()
    # The fourth member finds no node with a free device: nothing is bound, and the
    # three placed members are unreserved.
    assert h.client.bindings == []
    assert sorted(plugin.unreserved) == [f"default/train-{i}" for i in range(3)]
    first = plugin.groups[0]
    assert first is not None and first.get(PENDING) is None
    # A fourth node: the next attempt has an area of its own and the gang fits.
    h.nodes([make_node().name("n3").capacity(cpu="4", memory="8Gi", pods=110).obj()])
    # (The plugin registers no queueing hints: the group waits out the flush.)
    await h.advance(400)
    await h.settle()
    assert sorted(n for _, n in h.client.bindings) == ["n0", "n1", "n2", "n3"]
    assert plugin.groups[-1] is not first
    await h.close()


async def test_a_pod_scheduled_on_its_own_has_no_group_area() -> None:
    plugin = OneDevicePerNode()
    h = harness(plugin, nodes=1)
    h.pods(
        [make_pod().name("solo").uid("solo").req(cpu="1").scheduler_name("troupe-scheduler").obj()]
    )
    await h.settle()
    assert h.client.bindings == [("default/solo", "n0")]
    assert plugin.groups == [None]
    await h.close()
