"""Validation of the Kubernetes 1.37 ``scheduling.k8s.io/v1beta1`` PodGroup and Workload.

``PodGroupStrategy`` and ``workloads.WorkloadStrategy`` refuse a write through
``v1beta1`` that upstream's validation refuses, with a 422 Invalid whose causes are
upstream's field errors (pkg/apis/scheduling/validation and the declarative tags of
staging/src/k8s.io/api/scheduling/v1beta1/types.go):

- required fields (``schedulingPolicy``, ``gang.minCount``, ``workloadRef``'s two names,
  a template's name, a claim's name, a topology key);
- the unions: ``schedulingPolicy`` exactly one of ``basic`` | ``gang``; ``disruptionMode``
  exactly one of ``single`` | ``all`` (``{single: {}}`` is the default), and ``all`` is
  invalid with ``basic``; a claim names exactly one of a claim or a template;
- ``minCount`` at least 1, ``priority`` at most 1000000000, ``preemptionPolicy`` Never |
  PreemptLowerPriority;
- maxItems: 8 templates, 4 resource claims, 1 topology constraint;
- on update, immutability: the policy's kind (``basic`` immutable, ``gang`` neither set
  nor unset), ``workloadRef``, ``schedulingConstraints``, ``resourceClaims``,
  ``disruptionMode``, ``priorityClassName``, ``priority``, ``preemptionPolicy``,
  ``parentCompositePodGroupName``; a Workload's templates cannot be added or removed
  and its ``controllerRef`` cannot change. ``gang.minCount`` stays mutable (1.37).

Writes through ``v1alpha2`` are stored as given (converted to the stored shape), as the
embedded cluster served that version before; status writes are not validated. Objects
are checked in the stored (``v1beta1``) shape. ``kinds.py`` declares both;
``workloads`` and ``composites`` use the field-error helpers here.
"""

from __future__ import annotations

import json
from typing import Any, Final

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.storage.store import Obj, Store

Cause = tuple[str, str, str]

MAX_TEMPLATES: Final = 8
MAX_RESOURCE_CLAIMS: Final = 4
MAX_TOPOLOGY: Final = 1
HIGHEST_USER_DEFINABLE_PRIORITY: Final = 1_000_000_000
PREEMPTION_POLICIES: Final = ("Never", "PreemptLowerPriority")
VALIDATED_VERSION: Final = "v1beta1"
# Spec fields of a PodGroup (and of a template) that never change after create.
TEMPLATE_IMMUTABLE: Final = (
    "schedulingConstraints",
    "resourceClaims",
    "disruptionMode",
    "priorityClassName",
    "priority",
    "preemptionPolicy",
)
_POD_GROUP_IMMUTABLE: Final = ("workloadRef", "parentCompositePodGroupName", *TEMPLATE_IMMUTABLE)


def show(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool | int | float) or value is None:
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def required(path: str, detail: str = "") -> Cause:
    return path, "FieldValueRequired", "Required value" + (f": {detail}" if detail else "")


def invalid(path: str, value: Any, detail: str) -> Cause:
    return path, "FieldValueInvalid", f"Invalid value: {show(value)}: {detail}"


def too_many(path: str, count: int, limit: int) -> Cause:
    items = "item" if limit == 1 else "items"
    return path, "FieldValueTooMany", f"Too many: {count}: must have at most {limit} {items}"


def forbidden(path: str, detail: str) -> Cause:
    return path, "FieldValueForbidden", f"Forbidden: {detail}"


def union(path: str, value: Any, members: tuple[str, ...]) -> tuple[list[Cause], str | None]:
    """Exactly one member of a union set: (causes, the member set)."""
    names = ", ".join(f"`{m}`" for m in members)
    if not isinstance(value, dict):
        return [invalid(path, value, f"must specify one of: {names}")], None
    chosen = [m for m in members if value.get(m) is not None]
    if not chosen:
        return [invalid(path, "", f"must specify one of: {names}")], None
    if len(chosen) > 1:
        shown = "{" + ", ".join(f"`{m}`" for m in chosen) + "}"
        detail = f"exactly one of {names} is required, but multiple fields are set"
        return [invalid(path, shown, detail)], None
    return [], chosen[0]


def pod_group_policy(path: str, policy: Any) -> tuple[list[Cause], str | None]:
    if policy is None:
        return [required(path)], None
    causes, chosen = union(path, policy, ("basic", "gang"))
    if chosen == "gang":
        gang = policy["gang"]
        count = gang.get("minCount") if isinstance(gang, dict) else None
        field = f"{path}.gang.minCount"
        if not count:
            causes.append(required(field))
        elif not isinstance(count, int) or count < 1:
            causes.append(invalid(field, count, "must be greater than or equal to 1"))
    return causes, chosen


def group_fields(path: str, spec: Obj, policy_kind: str | None) -> list[Cause]:
    """What a PodGroup spec and a PodGroupTemplate have in common."""
    causes: list[Cause] = []
    mode = spec.get("disruptionMode")
    if mode is not None:
        found, chosen = union(f"{path}.disruptionMode", mode, ("single", "all"))
        causes += found
        if chosen == "all" and policy_kind == "basic":
            causes.append(
                invalid(
                    f"{path}.disruptionMode",
                    "all",
                    "must be `single` when the scheduling policy is `basic`",
                )
            )
    priority = spec.get("priority")
    if isinstance(priority, int) and priority > HIGHEST_USER_DEFINABLE_PRIORITY:
        causes.append(
            invalid(
                f"{path}.priority",
                priority,
                f"must be less than or equal to {HIGHEST_USER_DEFINABLE_PRIORITY}",
            )
        )
    preemption = spec.get("preemptionPolicy")
    if preemption is not None and preemption not in PREEMPTION_POLICIES:
        supported = ", ".join(f'"{p}"' for p in PREEMPTION_POLICIES)
        causes.append(
            (
                f"{path}.preemptionPolicy",
                "FieldValueNotSupported",
                f"Unsupported value: {show(preemption)}: supported values: {supported}",
            )
        )
    claims = spec.get("resourceClaims") or []
    if len(claims) > MAX_RESOURCE_CLAIMS:
        causes.append(too_many(f"{path}.resourceClaims", len(claims), MAX_RESOURCE_CLAIMS))
    else:
        for index, claim in enumerate(claims):
            at = f"{path}.resourceClaims[{index}]"
            if not isinstance(claim, dict) or not claim.get("name"):
                causes.append(required(f"{at}.name"))
                continue
            causes += union(at, claim, ("resourceClaimName", "resourceClaimTemplateName"))[0]
    constraints = spec.get("schedulingConstraints")
    topology = (constraints or {}).get("topology") or [] if isinstance(constraints, dict) else []
    if len(topology) > MAX_TOPOLOGY:
        causes.append(
            too_many(f"{path}.schedulingConstraints.topology", len(topology), MAX_TOPOLOGY)
        )
    else:
        for index, item in enumerate(topology):
            if not isinstance(item, dict) or not item.get("key"):
                causes.append(required(f"{path}.schedulingConstraints.topology[{index}].key"))
    return causes


def policy_update(path: str, new: Any, old: Any) -> list[Cause]:
    """The policy's kind is fixed at create: ``basic`` is immutable, ``gang`` can be
    neither set nor unset; ``gang.minCount`` may change."""
    new, old = new or {}, old or {}
    causes: list[Cause] = []
    if (new.get("basic") is None) != (old.get("basic") is None):
        causes.append(invalid(f"{path}.basic", new.get("basic"), "field is immutable"))
    if old.get("gang") is None and new.get("gang") is not None:
        causes.append(forbidden(f"{path}.gang", "field cannot be set once created"))
    if old.get("gang") is not None and new.get("gang") is None:
        causes.append(forbidden(f"{path}.gang", "field cannot be cleared once set"))
    return causes


def immutable(path: str, new: Obj, old: Obj, fields: tuple[str, ...]) -> list[Cause]:
    return [
        invalid(f"{path}.{name}", new.get(name), "field is immutable")
        for name in fields
        if new.get(name) != old.get(name)
    ]


def spec_of(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


class PodGroupStrategy(GenericStrategy):
    def prepare_create(self, store: Store, rt: ResourceType, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict) and spec.get("disruptionMode") is None:
            spec["disruptionMode"] = {"single": {}}  # +default={"single": {}}
        if rt.version == VALIDATED_VERSION:
            refuse(rt, obj, validate_pod_group(obj))

    def prepare_update(
        self, store: Store, rt: ResourceType, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        if subresource is not None or rt.version != VALIDATED_VERSION:
            return
        spec, old_spec = spec_of(new), spec_of(old)
        if spec.get("disruptionMode") is None and old_spec.get("disruptionMode") is not None:
            spec["disruptionMode"] = old_spec["disruptionMode"]
        causes = validate_pod_group(new)
        causes += policy_update(
            "spec.schedulingPolicy", spec.get("schedulingPolicy"), old_spec.get("schedulingPolicy")
        )
        causes += immutable("spec", spec, old_spec, _POD_GROUP_IMMUTABLE)
        refuse(rt, new, causes)


def validate_pod_group(obj: Obj) -> list[Cause]:
    """Upstream's field errors for a v1beta1 PodGroup (in its stored shape)."""
    if not isinstance(obj.get("spec"), dict):
        return [required("spec")]
    spec = obj["spec"]
    causes, kind = pod_group_policy("spec.schedulingPolicy", spec.get("schedulingPolicy"))
    ref = spec.get("workloadRef")
    if ref is not None:
        ref = ref if isinstance(ref, dict) else {}
        for name in ("workloadName", "templateName"):
            if not ref.get(name):
                causes.append(required(f"spec.workloadRef.{name}"))
    return causes + group_fields("spec", spec, kind)


def refuse(rt: ResourceType, obj: Obj, causes: list[Cause]) -> None:
    if causes:
        name = str((obj.get("metadata") or {}).get("name") or "")
        raise errors.invalid(rt, name, causes)
