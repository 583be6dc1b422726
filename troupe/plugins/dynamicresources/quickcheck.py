"""A cheap necessary condition per node, to prune nodes before the exact allocator.

DESIGN.md "Fast paths stay columnar": the DynamicResources plugin can fill a NodeTable
column with ``DeviceCounts.free(node, class)`` (devices of the class the node can reach
and nobody holds) and drop every node where a pod's ``Demand`` exceeds it, then run
``Allocator.allocate`` on the few left.

Exact when it says no: a pod's exact-count requests that are not admin access need as
many distinct unused devices of their class as they count (devices that allow multiple
allocations may be shared, so a class that has one on the node is never short), and an
``All`` request at least one matching device; the allocator can only take unused devices
of usable pools that match the class. ``firstAvailable`` requests are not counted.
It may say yes where the allocator says no (request selectors, constraints, taints,
counters, capacity): it is a filter, not an answer. ``tests/plugins/dynamicresources``
checks on random instances that it never rejects a node the allocator fills.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from troupe.api.dra.cel import CelEnvironment, CelError
from troupe.api.dra.objects import ALL, DeviceClass, ResourceClaim
from troupe.api.objects import Node
from troupe.plugins.dynamicresources.pools import DeviceEntry, Inventory
from troupe.plugins.dynamicresources.state import AllocatedDevices

UNBOUNDED: Final = sys.maxsize


@dataclass(frozen=True)
class Demand:
    """Devices a pod's claims need at the least, per class."""

    per_class: Mapping[str, int]

    @classmethod
    def of(cls, claims: Sequence[ResourceClaim]) -> Demand:
        need: Counter[str] = Counter()
        for claim in claims:
            for request in claim.spec.devices.requests:
                exact = request.exactly
                if exact is None or exact.admin_access:
                    continue
                need[exact.device_class_name] += exact.count if exact.allocation_mode != ALL else 1
        return cls(dict(need))


class DeviceCounts:
    """Per (node, class): the matching devices, kept while the inventory is the same."""

    def __init__(
        self, classes: Mapping[str, DeviceClass], inventory: Inventory, cel: CelEnvironment
    ) -> None:
        self.classes = classes
        self.inventory = inventory
        self.cel = cel
        self._matching: dict[tuple[str, str], tuple[Node, list[DeviceEntry], bool]] = {}

    def matching(self, node: Node, class_name: str) -> tuple[list[DeviceEntry], bool]:
        """The devices of usable pools ``node`` reaches that match the class, and whether
        one of them allows multiple allocations."""
        key = (node.metadata.name, class_name)
        cached = self._matching.get(key)
        if cached is not None and cached[0] is node:
            return cached[1], cached[2]
        device_class = self.classes.get(class_name)
        found: list[DeviceEntry] = []
        if device_class is not None:
            found = [
                e for e in self.inventory.pools_for(node).devices if self._matches(device_class, e)
            ]
        multi = any(e.multi for e in found)
        self._matching[key] = (node, found, multi)
        return found, multi

    def _matches(self, device_class: DeviceClass, entry: DeviceEntry) -> bool:
        view = entry.cel(self.cel)
        for selector in device_class.spec.selectors:
            if selector.cel is None:
                continue
            try:
                if not self.cel.matches(selector.cel.expression, view):
                    return False
            except CelError:
                return True  # the allocator reports it; do not hide the node from it
        return True

    def free(self, node: Node, class_name: str, allocated: AllocatedDevices) -> int:
        """How many matching devices nobody holds (``UNBOUNDED`` if one may be shared)."""
        found, multi = self.matching(node, class_name)
        if multi:
            return UNBOUNDED
        dedicated = allocated.dedicated
        return sum(1 for e in found if e.id not in dedicated)

    def may_fit(self, node: Node, demand: Demand, allocated: AllocatedDevices) -> bool:
        """False only when the node certainly cannot satisfy ``demand``."""
        return all(
            self.free(node, name, allocated) >= count for name, count in demand.per_class.items()
        )
