"""Devices already in use, as the allocator must see them.

Upstream's ``AllocatedState`` (``structured/schedulerapi/types.go``) built by the
plugin's ``allocateddevices.go`` from every allocated claim plus the in-flight
allocations of claims reserved but not yet written. A result with ``adminAccess`` does
not make its device busy; a result with a ``shareID`` (consumable capacity, KEP-5075)
marks its device as shared and adds to the capacity it consumes; any other result makes
its device dedicated.

The DynamicResources plugin builds one per scheduling cycle (``of_claims``) and adds the
allocations of pods reserved earlier in the cycle (``with_results``); the allocator and
``quickcheck`` read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from troupe.api.dra.objects import AllocationResult, ResourceClaim
from troupe.api.quantity import parse_nanos


class DeviceID(NamedTuple):
    """A device by driver, pool and name (upstream ``DeviceID``)."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True)
class AllocatedDevices:
    """Devices that allocated claims hold: ``dedicated`` ones are unusable by others;
    ``shared`` ones map to the capacity (nano-units per capacity name) their shares
    consume. A device in either is "allocated" for counter accounting."""

    dedicated: frozenset[DeviceID] = frozenset()
    shared: Mapping[DeviceID, Mapping[str, int]] = field(default_factory=dict)

    @classmethod
    def of_claims(cls, claims: Iterable[ResourceClaim]) -> AllocatedDevices:
        """The devices of every allocated claim in ``claims``."""
        allocations = (c.status.allocation for c in claims)
        return cls().with_results(a for a in allocations if a is not None)

    def with_results(self, allocations: Iterable[AllocationResult]) -> AllocatedDevices:
        """This state plus the devices of ``allocations`` (in-flight ones, say)."""
        dedicated = set(self.dedicated)
        shared = {device: dict(consumed) for device, consumed in self.shared.items()}
        for allocation in allocations:
            for result in allocation.devices.results:
                if result.admin_access:
                    continue
                device = DeviceID(result.driver, result.pool, result.device)
                if result.share_id is None:
                    dedicated.add(device)
                    continue
                consumed = shared.setdefault(device, {})
                for name, text in result.consumed_capacity.items():
                    consumed[name] = consumed.get(name, 0) + parse_nanos(text)
        return AllocatedDevices(frozenset(dedicated), shared)

    def is_allocated(self, device: DeviceID) -> bool:
        return device in self.dedicated or device in self.shared
