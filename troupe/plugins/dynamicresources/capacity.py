"""Consumable capacity (KEP-5075) and shared counters (KEP-4815), in exact nano-units.

Follows upstream's ``consumable_capacity.go`` and the counter bookkeeping of
``allocator_incubating.go``:

- a request's ``capacity.requests`` names capacities of the device; one the device does
  not have makes the device unsuitable. For every capacity of the device the amount
  consumed is the request (or, unrequested, the policy's default, else the whole
  capacity), rounded up by the policy (``validRange`` min and step, ``validValues``), and
  must not break the policy; what is already consumed (allocated shares plus this
  attempt's) plus it must not exceed the capacity;
- a device that consumes counters needs every counter of its counter sets to stay at or
  above zero after the allocated devices and this attempt's have taken theirs.

Called by the allocator (``search.py``) only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from troupe.api.dra.objects import CapacityRequestPolicy, Device, DeviceCapacity
from troupe.api.quantity import NANOS_PER_UNIT, format_quantity, parse_nanos


@dataclass(frozen=True, slots=True)
class Amount:
    """An amount in nano-units with the quantity string a result reports for it."""

    nanos: int
    text: str


def _amount(text: str) -> Amount:
    return Amount(parse_nanos(text), text)


def consumed_amount(requested: str | None, capacity: DeviceCapacity) -> Amount:
    """``calculateConsumedCapacity``: what a request takes of one capacity."""
    policy = capacity.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return _amount(policy.default)
        return _amount(capacity.value)
    wanted = _amount(requested)
    if policy is None:
        return wanted
    valid_range = policy.valid_range
    if valid_range is not None and valid_range.min is not None:
        low = _amount(valid_range.min)
        if wanted.nanos < low.nanos:
            return low
        if valid_range.step is None:
            return wanted
        # Upstream rounds in whole units (Quantity.Value) and writes a BinarySI quantity.
        units, step, base = (
            _units(wanted.nanos),
            _units(parse_nanos(valid_range.step)),
            _units(low.nanos),
        )
        steps = -(-(units - base) // step)
        value = base + step * steps
        return Amount(value * NANOS_PER_UNIT, format_quantity(value, binary=True))
    for valid in policy.valid_values:
        if wanted.nanos <= parse_nanos(valid):
            return _amount(valid)
    return wanted


def _units(nanos: int) -> int:
    return -(-nanos // NANOS_PER_UNIT)


def violates_policy(amount: int, policy: CapacityRequestPolicy | None) -> bool:
    """``violatesPolicy``: an amount outside the valid range or values."""
    if policy is None:
        return False
    if policy.default is not None and amount == parse_nanos(policy.default):
        return False
    valid_range = policy.valid_range
    if valid_range is not None:
        if valid_range.max is not None and amount > parse_nanos(valid_range.max):
            return True
        if valid_range.step is not None and valid_range.min is not None:
            added = _units(amount) - _units(parse_nanos(valid_range.min))
            return added % _units(parse_nanos(valid_range.step)) != 0
        return False
    if policy.valid_values:
        return all(amount != parse_nanos(v) for v in policy.valid_values)
    return False


def capacity_fits(
    device: Device,
    requests: Mapping[str, str],
    already: Mapping[str, int],
    allocating: Mapping[str, int],
) -> bool | None:
    """``CmpRequestOverCapacity``: whether the request fits the device's capacities on
    top of ``already`` (allocated shares) and ``allocating`` (this attempt's). ``None``
    when it requests a capacity the device does not have (upstream skips the device)."""
    if any(name not in device.capacity for name in requests):
        return None
    for name, capacity in device.capacity.items():
        amount = consumed_amount(requests.get(name), capacity)
        if violates_policy(amount.nanos, capacity.request_policy):
            return False
        total = already.get(name, 0) + amount.nanos + allocating.get(name, 0)
        if total > parse_nanos(capacity.value):
            return False
    return True


def consumed_capacity(device: Device, requests: Mapping[str, str]) -> dict[str, Amount]:
    """``GetConsumedCapacityFromRequest``: what one share takes of every capacity."""
    return {name: consumed_amount(requests.get(name), c) for name, c in device.capacity.items()}
