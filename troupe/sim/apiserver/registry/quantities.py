"""Resource-quantity validation of pods and nodes, as kube-apiserver does it.

What a scheduler reads as numbers must be numbers: the pod and node strategies'
``validate`` (every write through the HTTP API: ``Store.create`` / ``Store.update``
with ``validate=True``) run these after the kind's preparation, and refuse

- a quantity that does not parse: 400 BadRequest ``Pod in version "v1" cannot be
  handled as a Pod: <the parser's reason>``, as upstream's decoder refuses the body
  before validation runs (``quantities must match the regular expression ...``,
  ``unable to parse quantity's suffix``);
- a negative quantity: 422 Invalid, ``<field>: Invalid value: "-1": must be greater
  than or equal to 0`` (``ValidateNonnegativeQuantity``), for containers' and init
  containers' ``resources.requests[...]`` / ``resources.limits[...]``, the pod's
  ``spec.overhead[...]`` and a node's ``status.capacity.<name>`` /
  ``status.allocatable.<name>``;
- a request above its limit: ``spec.containers[0].resources.requests: Invalid value:
  "2": must be less than or equal to cpu limit of 1`` (``validateResourceRequirements``).

A pod's spec is not checked on a write to its status subresource (upstream's status
strategy validates status only). Writes made straight into the store (``validate``
False, the default) are not checked: tests use them to stand for objects a real server
accepted from an older version or that another client slipped in.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, Final

from troupe.api.quantity import NANOS_PER_UNIT, QuantityError, format_quantity, parse_nanos
from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.resources import ResourceType

Obj = dict[str, Any]
Cause = tuple[str, str, str]

_NEGATIVE: Final = "must be greater than or equal to 0"


class _Undecodable(Exception):
    """A value the decoder refuses (the whole body is a BadRequest)."""


def _nanos(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _Undecodable("quantities must be a string or a number")
    text = value if isinstance(value, str) else repr(value)
    try:
        return parse_nanos(text)
    except QuantityError as err:
        raise _Undecodable(err.reason) from None


def _shown(value: Any, nanos: int) -> str:
    """``Quantity.String()``: the canonical form, binary when written binary."""
    binary = isinstance(value, str) and "i" in value
    return format_quantity(Fraction(nanos, NANOS_PER_UNIT), binary=binary)


def _quantity_map(values: Any, path: str, causes: list[Cause], *, dotted: bool) -> dict[str, int]:
    """Parse one resource map; negative amounts become causes. ``dotted`` names a
    resource ``path.cpu`` (node status) rather than ``path[cpu]``."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise _Undecodable(f"{path} must be an object")
    parsed: dict[str, int] = {}
    for name, value in values.items():
        nanos = _nanos(value)
        if nanos < 0:
            where = f"{path}.{name}" if dotted else f"{path}[{name}]"
            shown = _shown(value, nanos)
            causes.append((where, "FieldValueInvalid", f'Invalid value: "{shown}": {_NEGATIVE}'))
        parsed[name] = nanos
    return parsed


def _requirements(resources: Any, path: str, causes: list[Cause]) -> None:
    if not isinstance(resources, dict):
        return
    limits_raw = resources.get("limits") or {}
    requests_raw = resources.get("requests") or {}
    limits = _quantity_map(limits_raw, f"{path}.limits", causes, dotted=False)
    requests = _quantity_map(requests_raw, f"{path}.requests", causes, dotted=False)
    for name, nanos in requests.items():
        limit = limits.get(name)
        if limit is not None and nanos > limit:
            shown = _shown(requests_raw[name], nanos)
            detail = (
                f"must be less than or equal to {name} limit of {_shown(limits_raw[name], limit)}"
            )
            causes.append(
                (f"{path}.requests", "FieldValueInvalid", f'Invalid value: "{shown}": {detail}')
            )


def _pod_causes(obj: Obj) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    causes: list[Cause] = []
    for field in ("containers", "initContainers"):
        containers = spec.get(field)
        if not isinstance(containers, list):
            continue
        for i, container in enumerate(containers):
            if isinstance(container, dict):
                _requirements(container.get("resources"), f"spec.{field}[{i}].resources", causes)
    _quantity_map(spec.get("overhead"), "spec.overhead", causes, dotted=False)
    return causes


def _node_causes(obj: Obj) -> list[Cause]:
    status = obj.get("status")
    if not isinstance(status, dict):
        return []
    causes: list[Cause] = []
    for field in ("capacity", "allocatable"):
        _quantity_map(status.get(field), f"status.{field}", causes, dotted=True)
    return causes


def validate_pod(rt: ResourceType, obj: Obj) -> None:
    """Raise the ``ApiError`` kube-apiserver answers for a pod's quantities, if any."""
    _refuse(rt, obj, _pod_causes)


def validate_node(rt: ResourceType, obj: Obj) -> None:
    """Raise the ``ApiError`` kube-apiserver answers for a node's quantities, if any."""
    _refuse(rt, obj, _node_causes)


def _refuse(rt: ResourceType, obj: Obj, check: Callable[[Obj], list[Cause]]) -> None:
    try:
        causes = check(obj)
    except _Undecodable as err:
        raise errors.bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {err}'
        ) from None
    if causes:
        raise errors.invalid(rt, str(obj.get("metadata", {}).get("name", "")), causes)
