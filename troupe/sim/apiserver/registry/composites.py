"""Validation of the Kubernetes 1.37 ``scheduling.k8s.io/v1alpha3`` CompositePodGroup.

``CompositePodGroupStrategy`` refuses a write that upstream's validation refuses, with
a 422 Invalid whose causes are upstream's field errors (the declarative tags of
staging/src/k8s.io/api/scheduling/v1alpha3/types.go, KEP-6012):

- ``spec.workloadRef`` is required, and both its names;
- ``spec.schedulingPolicy`` is required and a union: exactly one of ``basic`` |
  ``gang``; ``gang.minGroupCount`` is required and at least 1;
- ``priority`` at most 1000000000; ``parentCompositePodGroupName``, when set, a DNS
  subdomain;
- on update every spec field is immutable (``parentCompositePodGroupName``,
  ``workloadRef``, ``schedulingPolicy``, ``priorityClassName``, ``priority``).

Status writes are not validated. Layout rules that span objects (cycles, a tree deeper
than 4, children of different Workloads) are not the API server's: the scheduler
checks them at run time. ``kinds.py`` declares the strategy.
"""

from __future__ import annotations

import re
from typing import Final

from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.registry.podgroups import (
    HIGHEST_USER_DEFINABLE_PRIORITY,
    Cause,
    immutable,
    invalid,
    refuse,
    required,
    spec_of,
    union,
)
from troupe.sim.apiserver.storage.store import Obj, Store

_IMMUTABLE: Final = (
    "parentCompositePodGroupName",
    "workloadRef",
    "schedulingPolicy",
    "priorityClassName",
    "priority",
)
_DNS_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN: Final = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_DNS_SUBDOMAIN_MAX: Final = 253
_DNS_SUBDOMAIN_HELP: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)


class CompositePodGroupStrategy(GenericStrategy):
    def prepare_create(self, store: Store, rt: ResourceType, obj: Obj) -> None:
        refuse(rt, obj, validate_composite_pod_group(obj))

    def prepare_update(
        self, store: Store, rt: ResourceType, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        if subresource is not None:
            return
        causes = validate_composite_pod_group(new)
        causes += immutable("spec", spec_of(new), spec_of(old), _IMMUTABLE)
        refuse(rt, new, causes)


def validate_composite_pod_group(obj: Obj) -> list[Cause]:
    """Upstream's field errors for a v1alpha3 CompositePodGroup."""
    if not isinstance(obj.get("spec"), dict):
        return [required("spec")]
    spec = obj["spec"]
    causes: list[Cause] = []
    parent = spec.get("parentCompositePodGroupName")
    if parent is not None and not _is_dns_subdomain(parent):
        causes.append(invalid("spec.parentCompositePodGroupName", parent, _DNS_SUBDOMAIN_HELP))
    ref = spec.get("workloadRef")
    if ref is None:
        causes.append(required("spec.workloadRef"))
    else:
        ref = ref if isinstance(ref, dict) else {}
        for name in ("workloadName", "templateName"):
            if not ref.get(name):
                causes.append(required(f"spec.workloadRef.{name}"))
    causes += composite_policy("spec.schedulingPolicy", spec.get("schedulingPolicy"))
    return causes + priority_at_most_highest("spec.priority", spec.get("priority"))


def composite_policy(path: str, policy: object) -> list[Cause]:
    """A CompositePodGroup's (or its template's) policy: exactly one of ``basic`` |
    ``gang``, and ``gang.minGroupCount`` set and at least 1."""
    if policy is None:
        return [required(path)]
    causes, chosen = union(path, policy, ("basic", "gang"))
    if chosen == "gang" and isinstance(policy, dict):
        gang = policy["gang"]
        count = gang.get("minGroupCount") if isinstance(gang, dict) else None
        field = f"{path}.gang.minGroupCount"
        if not count:
            causes.append(required(field))
        elif not isinstance(count, int) or count < 1:
            causes.append(invalid(field, count, "must be greater than or equal to 1"))
    return causes


def priority_at_most_highest(path: str, priority: object) -> list[Cause]:
    if isinstance(priority, int) and priority > HIGHEST_USER_DEFINABLE_PRIORITY:
        detail = f"must be less than or equal to {HIGHEST_USER_DEFINABLE_PRIORITY}"
        return [invalid(path, priority, detail)]
    return []


def _is_dns_subdomain(value: object) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= _DNS_SUBDOMAIN_MAX
        and _DNS_SUBDOMAIN.fullmatch(value) is not None
    )
