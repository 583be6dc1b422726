"""The devices a node can reach: ResourceSlices grouped into pools, per node.

Follows upstream's ``GatherPools`` (``structured/internal/incubating/pools_incubating.go``):

- a slice is relevant to a node through ``nodeName``, ``allNodes`` or ``nodeSelector``;
  with ``perDeviceNodeSelection`` when one of its devices is (a slice with none of these
  is from a future API and skipped);
- slices group into pools by (driver, pool); within a pool only the highest generation
  counts. A pool whose relevant slices do not add up to ``resourceSliceCount`` is looked
  up among all slices: if a newer generation exists elsewhere the pool is obsolete and
  skipped, if the count still falls short it is *incomplete*;
- a pool with duplicate device names, duplicate counter sets, or devices consuming a
  counter no counter set defines is *invalid*. Neither kind is allocated from;
- pools are ordered by (driver, pool), those whose devices carry binding conditions
  last; slices by name. That order is the allocator's first-fit order.

``Inventory`` is built from a snapshot of all slices and reused while they do not
change; ``pools_for(node)`` is cached per Node object. The allocator and ``quickcheck``
call it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from troupe.api.dra.cel import CelDevice, CelEnvironment, DeviceIdentity
from troupe.api.dra.objects import Device, DeviceTaint, ResourceSlice
from troupe.api.objects import Node, NodeSelector
from troupe.api.quantity import parse_nanos
from troupe.api.selectors import node_selector_matches
from troupe.plugins.dynamicresources.state import DeviceID

BLOCKING_TAINT_EFFECTS: Final = ("NoSchedule", "NoExecute")


class PoolID(NamedTuple):
    driver: str
    pool: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}"


class DeviceEntry:
    """One published device with what the allocator reads from it, parsed once."""

    __slots__ = (
        "_cel",
        "_cel_env",
        "blocking_taints",
        "counters",
        "device",
        "id",
        "identity",
        "multi",
        "plain_capacity",
        "slice",
    )

    def __init__(self, slice_: ResourceSlice, device: Device) -> None:
        spec = slice_.spec
        self.slice = slice_
        self.device = device
        self.id = DeviceID(spec.driver, spec.pool.name, device.name)
        self.identity = DeviceIdentity(
            spec.driver,
            spec.pool.name,
            device.name,
            slice_.metadata.name,
            # An API server changes the resourceVersion on every write.
            slice_.metadata.resource_version,
        )
        self.multi = bool(device.allow_multiple_allocations)
        self.plain_capacity = all(c.request_policy is None for c in device.capacity.values())
        self.counters = [
            (c.counter_set, {name: parse_nanos(v.value) for name, v in c.counters.items()})
            for c in device.consumes_counters
        ]
        self.blocking_taints: list[DeviceTaint] = [
            t for t in device.taints if t.effect in BLOCKING_TAINT_EFFECTS
        ]
        self._cel: CelDevice | None = None
        self._cel_env: CelEnvironment | None = None

    def cel(self, env: CelEnvironment) -> CelDevice:
        """This device's CEL view in ``env`` (kept, so its results are reused)."""
        if self._cel is None or self._cel_env is not env:
            self._cel = env.device(self.identity, self.device)
            self._cel_env = env
        return self._cel

    def node_selection(self) -> tuple[str | None, bool, NodeSelector | None]:
        """(nodeName, allNodes, nodeSelector) that place this device: its own with
        per-device node selection, else its slice's."""
        spec = self.slice.spec
        if spec.per_device_node_selection:
            d = self.device
            return d.node_name, bool(d.all_nodes), d.node_selector
        return spec.node_name, bool(spec.all_nodes), spec.node_selector

    def __repr__(self) -> str:
        return f"DeviceEntry({self.id})"


@dataclass
class Pool:
    """One pool as one node sees it."""

    id: PoolID
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    devices: list[DeviceEntry] = field(default_factory=list)  # reachable, in first-fit order
    other_devices: list[DeviceEntry] = field(default_factory=list)  # same pool, other nodes
    counter_sets: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        return not (self.incomplete or self.invalid)


@dataclass(frozen=True)
class NodePools:
    """A node's pools in order, and the devices of its usable ones flattened in the same
    order (the allocator's search space)."""

    pools: list[Pool]
    devices: list[DeviceEntry]
    pool_of: dict[DeviceID, Pool]


def node_matches(node: Node, name: str | None, all_nodes: bool, selector: Any) -> bool:
    """Upstream ``NodeMatches``: by name, all nodes, or a node selector."""
    if name:
        return node.metadata.name == name
    if all_nodes:
        return True
    if selector is not None:
        return node_selector_matches(selector, node.metadata.labels, node.metadata.name)
    return False


class Inventory:
    """Every ResourceSlice, indexed for per-node pool gathering."""

    def __init__(self, slices: Iterable[ResourceSlice]) -> None:
        self.slices = list(slices)
        self._entries: dict[int, list[DeviceEntry]] = {
            id(s): [DeviceEntry(s, d) for d in s.spec.devices] for s in self.slices
        }
        self._on_node: dict[str, list[ResourceSlice]] = defaultdict(list)
        self._shared: list[ResourceSlice] = []
        self._by_pool: dict[PoolID, list[ResourceSlice]] = defaultdict(list)
        for s in self.slices:
            if s.spec.node_name:
                self._on_node[s.spec.node_name].append(s)
            else:
                self._shared.append(s)
            self._by_pool[PoolID(s.spec.driver, s.spec.pool.name)].append(s)
        self._cache: dict[str, tuple[Node, NodePools]] = {}

    def entries(self, slice_: ResourceSlice) -> list[DeviceEntry]:
        return self._entries[id(slice_)]

    def pools_for(self, node: Node) -> NodePools:
        """The pools ``node`` can reach (cached while the same Node object is passed)."""
        cached = self._cache.get(node.metadata.name)
        if cached is not None and cached[0] is node:
            return cached[1]
        pools = self._gather(node)
        devices = [e for p in pools if p.usable for e in p.devices]
        result = NodePools(pools, devices, {e.id: p for p in pools for e in p.devices})
        self._cache[node.metadata.name] = (node, result)
        return result

    def _relevant(self, s: ResourceSlice, node: Node) -> bool:
        spec = s.spec
        if spec.node_name or spec.all_nodes or spec.node_selector is not None:
            return node_matches(node, spec.node_name, bool(spec.all_nodes), spec.node_selector)
        if spec.per_device_node_selection:
            return any(
                node_matches(node, d.node_name, bool(d.all_nodes), d.node_selector)
                for d in spec.devices
            )
        return False  # some future way of node selection

    def _gather(self, node: Node) -> list[Pool]:
        grouped: dict[PoolID, list[ResourceSlice]] = {}
        for s in [*self._on_node.get(node.metadata.name, ()), *self._shared]:
            if not self._relevant(s, node):
                continue
            pid = PoolID(s.spec.driver, s.spec.pool.name)
            have = grouped.get(pid)
            if have is None or s.spec.pool.generation > have[0].spec.pool.generation:
                grouped[pid] = [s]
            elif s.spec.pool.generation == have[0].spec.pool.generation:
                have.append(s)
        plain: list[Pool] = []
        binding: list[Pool] = []
        for pid, relevant in grouped.items():
            pool = self._pool(pid, relevant, node)
            if pool is None:
                continue
            has_conditions = any(e.device.binding_conditions for e in pool.devices)
            (binding if has_conditions else plain).append(pool)
        return sorted(plain, key=lambda p: p.id) + sorted(binding, key=lambda p: p.id)

    def _pool(self, pid: PoolID, relevant: list[ResourceSlice], node: Node) -> Pool | None:
        generation = relevant[0].spec.pool.generation
        wanted = relevant[0].spec.pool.resource_slice_count
        if len(relevant) == wanted:
            return self._build(pid, relevant, [], node)
        everything = self._by_pool[pid]
        if any(s.spec.pool.generation > generation for s in everything):
            return None  # obsolete: the driver is publishing a newer generation
        same = [s for s in everything if s.spec.pool.generation == generation]
        if len(same) != wanted:
            return Pool(pid, incomplete=True)
        names = {id(s) for s in relevant}
        return self._build(pid, relevant, [s for s in same if id(s) not in names], node)

    def _build(
        self,
        pid: PoolID,
        relevant: Sequence[ResourceSlice],
        others: Sequence[ResourceSlice],
        node: Node,
    ) -> Pool:
        device_slices = sorted(
            (s for s in relevant if not s.spec.shared_counters), key=lambda s: s.metadata.name
        )
        counter_slices = [s for s in [*relevant, *others] if s.spec.shared_counters]
        other_slices = [s for s in others if not s.spec.shared_counters]
        pool = Pool(pid)
        names: set[str] = set()
        for s in device_slices:
            for entry in self.entries(s):
                if entry.id.device in names:
                    return Pool(
                        pid, invalid=True, invalid_reason=f"duplicate device name {entry.id.device}"
                    )
                names.add(entry.id.device)
                if not s.spec.per_device_node_selection or node_matches(
                    node, *entry.node_selection()
                ):
                    pool.devices.append(entry)
                else:  # still counts against the pool's counters
                    pool.other_devices.append(entry)
        pool.other_devices += [e for s in other_slices for e in self.entries(s)]
        for s in counter_slices:
            for counter_set in s.spec.shared_counters:
                if counter_set.name in pool.counter_sets:
                    return Pool(
                        pid,
                        invalid=True,
                        invalid_reason=f"duplicate counter set name {counter_set.name}",
                    )
                pool.counter_sets[counter_set.name] = {
                    name: parse_nanos(c.value) for name, c in counter_set.counters.items()
                }
        for entry in [*(e for s in device_slices for e in self.entries(s)), *pool.other_devices]:
            reason = _unknown_counter(entry, pool.counter_sets)
            if reason:
                return Pool(pid, invalid=True, invalid_reason=reason)
        return pool


def _unknown_counter(entry: DeviceEntry, counter_sets: dict[str, dict[str, int]]) -> str:
    for set_name, counters in entry.counters:
        known = counter_sets.get(set_name)
        if known is None:
            return f"counter set {set_name} not found"
        for name in counters:
            if name not in known:
                return f"counter {name} not found in counter set {set_name}"
    return ""
