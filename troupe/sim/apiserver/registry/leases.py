"""Leases (coordination.k8s.io/v1): upstream's ``ValidateLease`` / ``ValidateLeaseUpdate``.

Leader election reads a Lease's ``holderIdentity``, ``leaseDurationSeconds`` and
``renewTime``, so a write through the API must have their types (``schemas.LEASE``:
``leaseDurationSeconds: "abc"`` is the decoder's 400, a ``renewTime`` that is not a
MicroTime too) and upstream's rules: ``spec.leaseDurationSeconds: Invalid value: 0:
must be greater than 0``, ``leaseTransitions`` not negative, a ``strategy`` upstream
knows (or a qualified name), and ``preferredHolder`` only with a ``strategy``. Writes
straight into the store (a test standing for a hand-edited Lease) skip this. Declared
in ``kinds.py``.
"""

from __future__ import annotations

from typing import Any, Final

from troupe.sim.apiserver.machinery.content import is_qualified_name
from troupe.sim.apiserver.machinery.field import Cause, forbidden, invalid, not_supported
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.registry.schemas import LEASE
from troupe.sim.apiserver.storage.store import Obj, Store

_STRATEGIES: Final = ("OldestEmulationVersion",)


class LeaseStrategy(GenericStrategy):
    schema = LEASE

    def causes(
        self, store: Store, rt: ResourceType, obj: Obj, old: Obj | None, subresource: str | None
    ) -> list[Cause]:
        spec = obj.get("spec")
        return lease_spec_causes(spec) if isinstance(spec, dict) else []


def lease_spec_causes(spec: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        causes.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        causes.append(
            invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0")
        )
    strategy = spec.get("strategy")
    if strategy is not None:
        if "/" not in strategy:
            if strategy not in _STRATEGIES:
                causes.append(not_supported("spec.strategy", strategy, _STRATEGIES))
        else:
            causes += [invalid("spec.strategy", strategy, m) for m in is_qualified_name(strategy)]
    if spec.get("preferredHolder") and not strategy:
        causes.append(
            forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined")
        )
    return causes
