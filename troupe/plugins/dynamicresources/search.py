"""One allocation attempt on one node: depth-first over claims -> requests -> device
slots, with backtracking; the first complete solution wins.

Follows upstream's ``allocateOne`` / ``allocateDevice``
(``structured/internal/incubating/allocator_incubating.go``):

- devices are tried in the node's pool order (``pools.py``); the next slot of the same
  request starts after the device the previous slot took, so a request tries
  combinations, not permutations;
- a candidate must be unused (allocated, or taken in this attempt by any claim; with
  ``adminAccess`` only not by the same claim), match the class's then the request's
  selectors (cached per device and request), fit the requested capacity, its counters,
  tolerate its NoSchedule/NoExecute taints, and keep the claim's constraints; all of it
  is undone on backtrack;
- ``All`` takes the devices decided before the search, every one or none;
- ``firstAvailable`` tries its subrequests in order; a subrequest that would push the
  claim past 32 devices makes the search skip the branches that cannot help.

Called by ``allocator.Allocator.allocate``; it returns what was picked per claim.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from troupe.api.dra.cel import CelCompileError, CelDevice, CelEnvironment, CelRuntimeError
from troupe.api.dra.objects import ALL, ALLOCATION_RESULTS_MAX_SIZE
from troupe.api.selectors import tolerates
from troupe.plugins.dynamicresources.capacity import Amount, capacity_fits, consumed_capacity
from troupe.plugins.dynamicresources.errors import (
    AllocationError,
    AllocationTimeout,
    SelectorCompileError,
    SelectorRuntimeError,
)
from troupe.plugins.dynamicresources.pools import DeviceEntry, NodePools, Pool, PoolID
from troupe.plugins.dynamicresources.requests import ClaimPlan, RequestData
from troupe.plugins.dynamicresources.state import AllocatedDevices, DeviceID

_EXCEEDED: Final = object()  # this branch would put a claim past 32 devices
_CHECK_CLOCK_EVERY: Final = 64

Counters = dict[str, dict[str, int]]  # counter set -> counter -> nano-units


@dataclass(slots=True)
class Picked:
    """A device taken for a request, with its share when the device is shared."""

    request: RequestData
    entry: DeviceEntry
    share_id: str | None = None
    consumed: dict[str, Amount] | None = None


@dataclass(frozen=True)
class Budget:
    """When to give up: a deadline on ``clock`` and/or a number of search steps."""

    clock: Callable[[], float]
    deadline: float | None = None
    max_steps: int | None = None


class Search:
    def __init__(
        self,
        *,
        cel: CelEnvironment,
        node_pools: NodePools,
        plans: list[ClaimPlan],
        allocated: AllocatedDevices,
        available_counters: Callable[[Pool], Counters],
        budget: Budget,
        match_cache: dict[tuple[DeviceEntry, tuple[str, tuple[str, ...]]], bool] | None = None,
        new_share_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.cel = cel
        self.node_pools = node_pools
        self.plans = plans
        self.allocated = allocated
        self.available_counters = available_counters
        self.budget = budget
        self.new_share_id = new_share_id
        self.picked: list[list[Picked]] = [[] for _ in plans]
        self.allocating: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, int]] = {}
        self.consumed: dict[PoolID, Counters] = {}
        # Whether a device matches a class and selectors; shared across attempts.
        self._matching = {} if match_cache is None else match_cache
        self._match_keys: dict[RequestData, tuple[str, tuple[str, ...]]] = {}
        self.steps = 0

    # -- the search ----------------------------------------------------------------------

    def run(self) -> bool:
        return self._one(0, 0, 0, 0, False, 0) is True

    def _one(self, c: int, r: int, alt: int, d: int, in_sub: bool, start: int) -> object:
        self._tick()
        if c == len(self.plans):
            return True
        plan = self.plans[c]
        if r == len(plan.requests):
            found = self._one(c + 1, 0, 0, 0, False, 0)
            return False if found is _EXCEEDED else found
        alternatives = plan.requests[r]
        rd = alternatives[alt]
        if rd.parent is not None and not in_sub:
            return self._first_available(plan, c, r, len(alternatives))
        all_devices = rd.all_devices if rd.mode == ALL else None
        if all_devices is not None and not all_devices:
            return False
        count = rd.count if all_devices is None else len(all_devices)
        if d >= count:
            return self._one(c, r + 1, 0, 0, False, 0)
        if len(self.picked[c]) + count - d > ALLOCATION_RESULTS_MAX_SIZE:
            return _EXCEEDED
        if all_devices is not None:
            undo = self._take(rd, all_devices[d], must=True)
            if undo is None:
                return False
            found = self._one(c, r, alt, d + 1, in_sub, 0)
            if found is not True:
                undo()
            return found
        devices = self.node_pools.devices
        for i in range(start, len(devices)):
            entry = devices[i]
            if not self._candidate(rd, entry):
                continue
            undo = self._take(rd, entry, must=False)
            if undo is None:
                continue
            found = self._one(c, r, alt, d + 1, in_sub, i + 1)
            if found is True:
                return True
            undo()
            if found is _EXCEEDED:
                return _EXCEEDED
        return False

    def _first_available(self, plan: ClaimPlan, c: int, r: int, n: int) -> object:
        all_exceeded = True
        for alt in range(n):
            found = self._one(c, r, alt, 0, True, 0)
            if found is _EXCEEDED:
                continue  # a later subrequest may ask for fewer devices
            all_exceeded = False
            if found is True:
                plan.selected[r] = alt
                return True
        return _EXCEEDED if all_exceeded else False

    def _tick(self) -> None:
        self.steps += 1
        budget = self.budget
        if budget.max_steps is not None and self.steps > budget.max_steps:
            raise AllocationTimeout
        if (
            budget.deadline is not None
            and self.steps % _CHECK_CLOCK_EVERY == 0
            and budget.clock() > budget.deadline
        ):
            raise AllocationTimeout

    # -- one candidate ---------------------------------------------------------------------

    def _candidate(self, rd: RequestData, entry: DeviceEntry) -> bool:
        """The cheap checks first, then the selectors."""
        if rd.admin_access:
            if rd.claim_index in self.allocating.get(entry.id, ()):
                return False
        elif self._in_use(entry.id):
            return False
        return self.selectable(rd, entry)

    def _in_use(self, device: DeviceID) -> bool:
        return device in self.allocated.dedicated or bool(self.allocating.get(device))

    def _capacity_in_use(self, device: DeviceID) -> bool:
        return device in self.allocated.shared or device in self.allocating_capacity

    def selectable(self, rd: RequestData, entry: DeviceEntry) -> bool:
        """Class selectors, then request selectors; cached per (device, class and
        selectors) for the allocator's lifetime."""
        match_key = self._match_keys.get(rd)
        if match_key is None:
            match_key = self._match_keys[rd] = rd.match_key
        key = (entry, match_key)
        known = self._matching.get(key)
        if known is None:
            known = self._matches(rd, entry)
            self._matching[key] = known
        return known

    def _matches(self, rd: RequestData, entry: DeviceEntry) -> bool:
        view = entry.cel(self.cel)
        device_class = rd.device_class
        for i, selector in enumerate(device_class.spec.selectors):
            if selector.cel is None:
                raise AllocationError(
                    f"class {device_class.name}: selector #{i}: CEL expression empty"
                    " (unsupported selector type?)"
                )
            if not self._eval(selector.cel.expression, view, entry, i, cls=device_class.name):
                return False
        claim = self.plans[rd.claim_index].claim.key
        return all(
            self._eval(expression, view, entry, i, claim=claim)
            for i, expression in enumerate(rd.selectors)
        )

    def _eval(
        self,
        expression: str,
        view: CelDevice,
        entry: DeviceEntry,
        index: int,
        *,
        cls: str = "",
        claim: str = "",
    ) -> bool:
        try:
            return self.cel.matches(expression, view)
        except CelCompileError as exc:
            where = f"class {cls}" if cls else f"claim {claim}"
            raise SelectorCompileError(
                f"{where}: selector #{index}: CEL compile error: {exc.message}",
                claim=claim,
                device_class=cls,
            ) from exc
        except CelRuntimeError as exc:
            where = f"class {cls}" if cls else f"claim {claim}"
            raise SelectorRuntimeError(
                f"{where}: selector #{index} on device {entry.id}: CEL runtime error:"
                f" {exc.message}",
                claim=claim,
                device_class=cls,
            ) from exc

    def capacity_ok(self, rd: RequestData, entry: DeviceEntry) -> bool:
        """Whether the request's capacity fits what is left of the device's."""
        device = entry.id
        if not entry.device.capacity:
            return not rd.capacity_requests
        if (
            entry.plain_capacity
            and not rd.capacity_requests
            and device not in self.allocated.shared
            and device not in self.allocating_capacity
        ):
            return True  # each capacity consumed whole, from nothing consumed: it fits
        fits = capacity_fits(
            entry.device,
            rd.capacity_requests,
            self.allocated.shared.get(device, {}),
            self.allocating_capacity.get(device, {}),
        )
        return bool(fits)

    def _take(
        self, rd: RequestData, entry: DeviceEntry, *, must: bool
    ) -> Callable[[], None] | None:
        """Take ``entry`` for ``rd`` if every rule allows; the undo, or None."""
        c, device, multi = rd.claim_index, entry.id, entry.multi
        if not multi and rd.admin_access and c in self.allocating.get(device, ()):
            return None
        if not rd.admin_access and self._in_use(device):
            return None
        if not self.capacity_ok(rd, entry):
            return None
        counters = bool(entry.counters) and not (multi and self._capacity_in_use(device))
        if counters and not self._take_counters(entry):
            return None
        if entry.blocking_taints and self._untolerated(rd, entry):
            if counters:
                self._release_counters(entry)
            return None
        constraints = self.plans[c].constraints
        for k, constraint in enumerate(constraints):
            if not constraint.add(rd.name, rd.parent, entry):
                for added in constraints[:k]:
                    added.remove()
                if must:
                    raise AllocationError(
                        f"claim {self.plans[c].claim.key}, request {rd.name}: cannot add device"
                        f" {device} because a claim constraint would not be satisfied"
                    )
                if counters:
                    self._release_counters(entry)
                return None
        picked = Picked(rd, entry)
        if multi:
            picked.consumed = consumed_capacity(entry.device, rd.capacity_requests)
            picked.share_id = self.new_share_id()
            self._add_capacity(device, picked.consumed, 1)
        else:
            self.allocating.setdefault(device, set()).add(c)
        self.picked[c].append(picked)

        def undo() -> None:
            for constraint in constraints:
                constraint.remove()
            if picked.consumed is not None:
                self._add_capacity(device, picked.consumed, -1)
            else:
                self.allocating[device].discard(c)
            if counters:
                self._release_counters(entry)
            self.picked[c].pop()

        return undo

    def _untolerated(self, rd: RequestData, entry: DeviceEntry) -> bool:
        return any(
            not any(tolerates(t, taint) for t in rd.tolerations) for taint in entry.blocking_taints
        )

    def _add_capacity(self, device: DeviceID, consumed: dict[str, Amount], sign: int) -> None:
        mine = self.allocating_capacity.setdefault(device, {})
        for name, amount in consumed.items():
            mine[name] = mine.get(name, 0) + sign * amount.nanos
        if sign < 0 and not any(mine.values()):
            del self.allocating_capacity[device]

    # -- counters ------------------------------------------------------------------------

    def _take_counters(self, entry: DeviceEntry) -> bool:
        pool = self.node_pools.pool_of[entry.id]
        available = self.available_counters(pool)
        consumed = self.consumed.setdefault(pool.id, {})
        for set_name, counters in entry.counters:
            mine = consumed.setdefault(set_name, {})
            for name, value in counters.items():
                mine[name] = mine.get(name, 0) + value
        # Upstream checks every counter of the pool, not only the device's.
        for set_name, counters in available.items():
            mine = consumed.get(set_name, {})
            if any(value < mine.get(name, 0) for name, value in counters.items()):
                self._release_counters(entry)
                return False
        return True

    def _release_counters(self, entry: DeviceEntry) -> None:
        consumed = self.consumed[self.node_pools.pool_of[entry.id].id]
        for set_name, counters in entry.counters:
            mine = consumed[set_name]
            for name, value in counters.items():
                mine[name] -= value
