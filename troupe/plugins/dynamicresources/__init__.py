"""DynamicResources: device allocation for ResourceClaims (DRA, ``resource.k8s.io/v1``).

This package holds the plugin's own logic, which the DynamicResources plugin (PreFilter
to PreBind, not written yet) will call:

- ``allocator.Allocator``: upstream's structured-parameters allocator for one node
  (``k8s.io/dynamic-resource-allocation/structured``), over
- ``pools.Inventory``: the ResourceSlices as pools per node,
- ``state.AllocatedDevices``: devices held by allocated and in-flight claims,
- ``quickcheck.DeviceCounts`` / ``Demand``: a cheap per-node necessary check,
- ``errors``: what allocation raises, by who has to act.

CEL selectors run through ``troupe.api.dra.cel``. docs/dra.md explains the semantics.
"""

from __future__ import annotations

from troupe.plugins.dynamicresources.allocator import FILTER_TIMEOUT_SECONDS, Allocator
from troupe.plugins.dynamicresources.errors import (
    AllocationError,
    AllocationTimeout,
    NodeAllocationError,
    SelectorCompileError,
    SelectorError,
    SelectorRuntimeError,
)
from troupe.plugins.dynamicresources.pools import Inventory
from troupe.plugins.dynamicresources.quickcheck import Demand, DeviceCounts
from troupe.plugins.dynamicresources.state import AllocatedDevices, DeviceID

__all__ = [
    "FILTER_TIMEOUT_SECONDS",
    "AllocatedDevices",
    "AllocationError",
    "AllocationTimeout",
    "Allocator",
    "Demand",
    "DeviceCounts",
    "DeviceID",
    "Inventory",
    "NodeAllocationError",
    "SelectorCompileError",
    "SelectorError",
    "SelectorRuntimeError",
]
