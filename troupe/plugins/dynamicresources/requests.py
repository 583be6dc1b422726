"""A claim's requests and constraints as the allocator walks them, checked once.

Follows upstream's ``validateDeviceRequest`` and the per-claim checks at the start of
``Allocate`` (``structured/internal/incubating/allocator_incubating.go``): every request
(or every subrequest of a ``firstAvailable`` one, KEP-4816) names a DeviceClass that
exists, has CEL selectors only, a known allocation mode; every constraint is of a known
kind; a claim asks for at most 32 devices at the least. A problem raises
``AllocationError`` with upstream's message.

Called by ``allocator.py`` once per ``allocate`` call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from troupe.api.dra.objects import (
    ALL,
    ALLOCATION_RESULTS_MAX_SIZE,
    EXACT_COUNT,
    CapacityRequirements,
    DeviceClass,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    DeviceToleration,
    ExactDeviceRequest,
    ResourceClaim,
)
from troupe.plugins.dynamicresources.constraints import Constraint
from troupe.plugins.dynamicresources.errors import AllocationError
from troupe.plugins.dynamicresources.pools import DeviceEntry


@dataclass(eq=False)
class RequestData:
    """One request, or one subrequest of a ``firstAvailable`` request."""

    claim_index: int
    name: str  # the request's, or the subrequest's
    parent: str | None  # the parent request's name for a subrequest
    device_class: DeviceClass
    selectors: list[str]  # the request's own CEL expressions
    mode: str
    count: int
    admin_access: bool
    tolerations: list[DeviceToleration]
    capacity_requests: Mapping[str, str]
    all_devices: list[DeviceEntry] | None = None  # mode All: decided before the search

    @property
    def match_key(self) -> tuple[str, tuple[str, ...]]:
        """What decides whether a device matches: the class and the request's selectors."""
        return self.device_class.name, tuple(self.selectors)

    @property
    def full_name(self) -> str:
        """``r`` or ``r/sub``: what the allocation result records."""
        return self.name if self.parent is None else f"{self.parent}/{self.name}"


@dataclass
class ClaimPlan:
    """One claim: per request its alternatives (one, or the subrequests in order)."""

    claim: ResourceClaim
    requests: list[list[RequestData]]
    constraints: list[Constraint]
    selected: list[int] = field(default_factory=list)  # chosen alternative per request


def plan_claim(
    claim_index: int, claim: ResourceClaim, classes: Mapping[str, DeviceClass]
) -> ClaimPlan:
    """The checked plan of ``claim``; raises ``AllocationError``."""
    key = claim.key
    requests: list[list[RequestData]] = []
    minimum = 0
    for request in claim.spec.devices.requests:
        alternatives = _alternatives(claim_index, key, request, classes)
        requests.append(alternatives)
        # An "All" count is only known later; it needs at least nothing here.
        minimum += min(a.count if a.mode == EXACT_COUNT else 0 for a in alternatives)
    if minimum > ALLOCATION_RESULTS_MAX_SIZE:
        raise AllocationError(
            f"claim {key}: number of requested devices {minimum} exceeds the claim limit"
            f" of {ALLOCATION_RESULTS_MAX_SIZE}"
        )
    constraints = []
    for i, constraint in enumerate(claim.spec.devices.constraints):
        names = frozenset(constraint.requests)
        if constraint.match_attribute:
            constraints.append(Constraint(names, constraint.match_attribute, distinct=False))
        elif constraint.distinct_attribute:
            constraints.append(Constraint(names, constraint.distinct_attribute, distinct=True))
        else:
            raise AllocationError(
                f"claim {key}, constraint #{i}: empty constraint (unsupported constraint type?)"
            )
    return ClaimPlan(claim, requests, constraints, [0] * len(requests))


def _alternatives(
    claim_index: int, key: str, request: DeviceRequest, classes: Mapping[str, DeviceClass]
) -> list[RequestData]:
    if request.exactly is not None:
        return [_data(claim_index, key, request.name, None, request.exactly, classes)]
    if request.first_available:
        return [
            _data(claim_index, key, sub.name, request.name, sub, classes)
            for sub in request.first_available
        ]
    raise AllocationError(
        f"claim {key}, request {request.name}: neither exactly nor firstAvailable is set"
        " (unsupported request type?)"
    )


def _data(
    claim_index: int,
    key: str,
    name: str,
    parent: str | None,
    request: ExactDeviceRequest | DeviceSubRequest,
    classes: Mapping[str, DeviceClass],
) -> RequestData:
    where = f"claim {key}, request {name}"
    selectors = _expressions(request.selectors, where)
    admin = bool(request.admin_access) if isinstance(request, ExactDeviceRequest) else False
    class_name = request.device_class_name
    if not class_name:
        raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
    device_class = classes.get(class_name)
    if device_class is None:
        raise AllocationError(
            f"{where}: could not retrieve device class {class_name}: "
            f'deviceclass.resource.k8s.io "{class_name}" not found'
        )
    if request.allocation_mode not in (EXACT_COUNT, ALL):
        raise AllocationError(f"{where}: unsupported count mode {request.allocation_mode}")
    capacity: CapacityRequirements | None = request.capacity
    return RequestData(
        claim_index=claim_index,
        name=name,
        parent=parent,
        device_class=device_class,
        selectors=selectors,
        mode=request.allocation_mode,
        count=request.count if request.allocation_mode == EXACT_COUNT else 0,
        admin_access=admin,
        tolerations=list(request.tolerations),
        capacity_requests=dict(capacity.requests) if capacity else {},
    )


def _expressions(selectors: list[DeviceSelector], where: str) -> list[str]:
    expressions = []
    for i, selector in enumerate(selectors):
        if selector.cel is None:
            raise AllocationError(
                f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)"
            )
        expressions.append(selector.cel.expression)
    return expressions
