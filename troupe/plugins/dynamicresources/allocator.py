"""The structured-parameters allocator: which devices of a node satisfy a pod's claims.

troupe's counterpart of ``k8s.io/dynamic-resource-allocation/structured``
(``Allocator.Allocate``; the "incubating" variant, which upstream uses when the beta
features are on: prioritized lists, partitionable devices, device taints, consumable
capacity, admin access, binding conditions). The DynamicResources plugin builds one
``Allocator`` per scheduling cycle from the classes, an ``Inventory`` of the slices, the
devices in use (allocated claims plus in-flight allocations) and the CEL environment,
then calls ``allocate`` per candidate node.

``allocate`` returns one ``AllocationResult`` per claim (in the claims' order) for the
first complete solution upstream's search would find, or ``None`` when the claims do not
fit the node. It raises ``AllocationError`` when the claims or classes are invalid
anywhere, ``NodeAllocationError`` when only this node is unusable (invalid pools and no
solution), ``AllocationTimeout`` past the deadline or step budget (errors.py).

Caches: whether a device matches a (class, selectors) pair and each pool's counters
left by the allocated devices live as long as the ``Allocator``; the per-(device,
expression) CEL results live in ``troupe.api.dra.cel`` and survive across cycles.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence

from troupe.api.dra.cel import CelEnvironment
from troupe.api.dra.objects import ALL, AllocationResult, DeviceClass, ResourceClaim
from troupe.api.objects import Node
from troupe.plugins.dynamicresources.errors import (
    INVALID_POOLS,
    AllocationError,
    NodeAllocationError,
)
from troupe.plugins.dynamicresources.pools import DeviceEntry, Inventory, NodePools, Pool, PoolID
from troupe.plugins.dynamicresources.requests import ClaimPlan, plan_claim
from troupe.plugins.dynamicresources.results import allocation_result
from troupe.plugins.dynamicresources.search import Budget, Counters, Search
from troupe.plugins.dynamicresources.state import AllocatedDevices

FILTER_TIMEOUT_SECONDS = 10.0
"""Upstream's default ``DynamicResourcesArgs.filterTimeout``."""


class Allocator:
    """Allocation against one snapshot of classes, slices and devices in use."""

    def __init__(
        self,
        classes: Mapping[str, DeviceClass],
        inventory: Inventory,
        allocated: AllocatedDevices,
        cel: CelEnvironment,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_steps: int | None = None,
        new_share_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.classes = classes
        self.inventory = inventory
        self.allocated = allocated
        self.cel = cel
        self.clock = clock
        self.max_steps = max_steps
        self.new_share_id = new_share_id
        self._available: dict[PoolID, Counters] = {}
        self._matching: dict[tuple[DeviceEntry, tuple[str, tuple[str, ...]]], bool] = {}
        self.last_steps = 0  # search steps of the latest allocate call

    def allocate(
        self, node: Node, claims: Sequence[ResourceClaim], *, deadline: float | None = None
    ) -> list[AllocationResult] | None:
        """Allocations for ``claims`` (all unallocated) on ``node``, or None.

        ``deadline`` is a time on the allocator's clock (upstream: Filter's 10 s)."""
        self.last_steps = 0
        if not claims:
            return []
        node_pools = self.inventory.pools_for(node)
        plans = [plan_claim(i, claim, self.classes) for i, claim in enumerate(claims)]
        search = Search(
            cel=self.cel,
            node_pools=node_pools,
            plans=plans,
            allocated=self.allocated,
            available_counters=self._available_counters,
            budget=Budget(self.clock, deadline, self.max_steps),
            match_cache=self._matching,
            new_share_id=self.new_share_id,
        )
        self._decide_all_devices(search, plans, node_pools)
        found = search.run()
        self.last_steps = search.steps
        if not found:
            if any(pool.invalid for pool in node_pools.pools):
                raise NodeAllocationError(INVALID_POOLS)
            return None
        return [
            allocation_result(plan, picked, node.metadata.name)
            for plan, picked in zip(plans, search.picked, strict=True)
        ]

    def _decide_all_devices(
        self, search: Search, plans: list[ClaimPlan], node_pools: NodePools
    ) -> None:
        """For each ``All`` request, every device it would take: all matching devices of
        every pool, which must then all be complete and valid."""
        for plan in plans:
            for alternatives in plan.requests:
                for rd in alternatives:
                    if rd.mode != ALL:
                        continue
                    rd.all_devices = []
                    for pool in node_pools.pools:
                        _check_whole(plan, rd.name, pool)
                        rd.all_devices += [
                            e
                            for e in pool.devices
                            if search.selectable(rd, e) and search.capacity_ok(rd, e)
                        ]

    def _available_counters(self, pool: Pool) -> Counters:
        """The pool's counters less what allocated devices consume (fixed per snapshot)."""
        known = self._available.get(pool.id)
        if known is None:
            known = {name: dict(counters) for name, counters in pool.counter_sets.items()}
            for entry in [*pool.devices, *pool.other_devices]:
                if not self.allocated.is_allocated(entry.id):
                    continue
                for set_name, counters in entry.counters:
                    available = known.get(set_name, {})
                    for name, value in counters.items():
                        if name in available:
                            available[name] -= value
            self._available[pool.id] = known
        return known


def _check_whole(plan: ClaimPlan, request: str, pool: Pool) -> None:
    state = "being updated" if pool.incomplete else "invalid" if pool.invalid else ""
    if state:
        raise AllocationError(
            f"claim {plan.claim.key}, request {request}: asks for all devices, but resource"
            f" pool {pool.id} is currently {state}"
        )
