"""Pod spec immutability on update and patch: upstream's ``ValidatePodUpdate``
(pkg/apis/core/validation).

A pod's spec is fixed once created except for:

* ``spec.containers[*].image`` and ``spec.initContainers[*].image`` (not to empty);
* ``spec.activeDeadlineSeconds``: set from nil, or lowered (never raised or unset);
* ``spec.tolerations``: additions only (an existing toleration may change only its
  ``tolerationSeconds``);
* ``spec.schedulingGates``: removals only;
* ``spec.terminationGracePeriodSeconds``: set to 1 when it was negative;
* while the pod is still gated (it had scheduling gates): additions to
  ``spec.nodeSelector``, and node affinity that only narrows the required terms.

Everything else (``nodeName``, which only the binding subresource sets, resources, which
only ``pods/resize`` changes since Kubernetes 1.33, ``schedulerName``, volumes, ...) is
refused with 422 ``spec: Forbidden: pod updates may not change fields other than ...``.
Upstream appends a Go ``cmp.Diff`` of the specs; this server appends one line per
changed field instead. Called by ``pods.PodStrategy.prepare_update``.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Final

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.storage.strategy import Obj

Cause = tuple[str, str, str]
_INT32_MAX: Final = 2**31 - 1
UPDATABLE_FIELDS: Final = (
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
)
_FORBIDDEN: Final = "FieldValueForbidden"
_INVALID: Final = "FieldValueInvalid"
_REQUIRED: Final = "FieldValueRequired"
_MAX_DIFF_LINES: Final = 20


def validate_pod_update(rt: ResourceType, new: Obj, old: Obj) -> None:
    """Raise 422 Invalid unless ``new``'s spec differs from ``old``'s only where allowed."""
    name = old["metadata"]["name"]
    new_spec = new.get("spec")
    old_spec: dict[str, Any] = old.get("spec") or {}
    if not isinstance(new_spec, dict):
        raise errors.invalid(rt, name, [("spec", _REQUIRED, "Required value")])
    if new_spec == old_spec:
        return
    causes: list[Cause] = []
    for field in ("containers", "initContainers"):
        stop = _container_updates(
            new_spec.get(field) or [], old_spec.get(field) or [], f"spec.{field}", causes
        )
        if stop:
            raise errors.invalid(rt, name, causes)
    if _active_deadline(new_spec, old_spec, causes):
        raise errors.invalid(rt, name, causes)
    _only_added_tolerations(new_spec, old_spec, causes)
    _only_deleted_gates(new_spec, old_spec, causes)
    munged = _munge(new_spec, old_spec, causes)
    if munged != old_spec:
        message = "Forbidden: pod updates may not change fields other than " + ",".join(
            UPDATABLE_FIELDS
        )
        diff = _diff(old_spec, munged, "spec")
        causes.append(("spec", _FORBIDDEN, message + "\n" + "\n".join(diff)))
    if causes:
        raise errors.invalid(rt, name, causes)


def _container_updates(new: list[Any], old: list[Any], path: str, causes: list[Cause]) -> bool:
    """``ValidateContainerUpdates``; True when validation must stop here."""
    if len(new) != len(old):
        causes.append((path, _FORBIDDEN, "Forbidden: pod updates may not add or remove containers"))
        return True
    for i, container in enumerate(new):
        if isinstance(container, dict) and not container.get("image"):
            causes.append((f"{path}[{i}].image", _REQUIRED, "Required value"))
    return False


def _active_deadline(new: dict[str, Any], old: dict[str, Any], causes: list[Cause]) -> bool:
    """Set from nil or lowered, never raised or unset; True when validation must stop."""
    path = "spec.activeDeadlineSeconds"
    value, before = new.get("activeDeadlineSeconds"), old.get("activeDeadlineSeconds")
    if value is not None:
        if not isinstance(value, int) or not 0 <= value <= _INT32_MAX:
            causes.append(
                (path, _INVALID, f"Invalid value: {value}: must be between 0 and {_INT32_MAX}, "
                 "inclusive")
            )  # fmt: skip
            return True
        if before is not None and before < value:
            causes.append(
                (path, _INVALID, f"Invalid value: {value}: must be less than or equal to "
                 "previous value")
            )  # fmt: skip
            return True
    elif before is not None:
        causes.append(
            (path, _INVALID, "Invalid value: \"null\": must not update from a positive integer "
             "to nil value")
        )  # fmt: skip
    return False


def _only_added_tolerations(new: dict[str, Any], old: dict[str, Any], causes: list[Cause]) -> None:
    added = new.get("tolerations") or []
    for before in old.get("tolerations") or []:
        kept = any(
            isinstance(t, dict)
            and {**before, "tolerationSeconds": t.get("tolerationSeconds")}
            == {**t, "tolerationSeconds": t.get("tolerationSeconds")}
            for t in added
        )
        if not kept:
            causes.append(
                (
                    "spec.tolerations",
                    _FORBIDDEN,
                    "Forbidden: existing toleration can not be modified except its "
                    "tolerationSeconds",
                )
            )
            return


def _only_deleted_gates(new: dict[str, Any], old: dict[str, Any], causes: list[Cause]) -> None:
    before = {g.get("name") for g in old.get("schedulingGates") or [] if isinstance(g, dict)}
    for i, gate in enumerate(new.get("schedulingGates") or []):
        gate_name = gate.get("name") if isinstance(gate, dict) else gate
        if gate_name not in before:
            causes.append(
                (
                    f"spec.schedulingGates[{i}].name",
                    _FORBIDDEN,
                    f"Forbidden: only deletion is allowed, but found new scheduling gate "
                    f"'{gate_name}'",
                )
            )


def _munge(new: dict[str, Any], old: dict[str, Any], causes: list[Cause]) -> dict[str, Any]:
    """``new`` with every field that may change put back to its old value."""
    munged = copy.deepcopy(new)
    for field in ("containers", "initContainers"):
        for container, before in zip(munged.get(field) or [], old.get(field) or [], strict=True):
            if isinstance(container, dict) and isinstance(before, dict):
                _put_back(container, before, "image")
    for field in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        _put_back(munged, old, field)
    grace, old_grace = (
        munged.get("terminationGracePeriodSeconds"),
        old.get("terminationGracePeriodSeconds"),
    )
    if isinstance(old_grace, int) and old_grace < 0 and grace == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    if old.get("schedulingGates"):
        _gated_mutations(munged, old, causes)
    return munged


def _put_back(target: dict[str, Any], source: dict[str, Any], field: str) -> None:
    if field in source:
        target[field] = source[field]
    else:
        target.pop(field, None)


def _gated_mutations(munged: dict[str, Any], old: dict[str, Any], causes: list[Cause]) -> None:
    """A gated pod may gain node selector labels and narrow its required node affinity."""
    selector, old_selector = munged.get("nodeSelector") or {}, old.get("nodeSelector") or {}
    if selector != old_selector:
        if any(selector.get(k) != v for k, v in old_selector.items()):
            causes.append(
                (
                    "spec.nodeSelector",
                    _INVALID,
                    f"Invalid value: {json.dumps(selector)}: only additions to spec.nodeSelector "
                    "are allowed (no mutations or deletions)",
                )
            )
        _put_back(munged, old, "nodeSelector")
    affinity = dict(munged.get("affinity") or {})
    old_affinity = old.get("affinity") or {}
    node_affinity, old_node_affinity = (
        affinity.get("nodeAffinity"),
        old_affinity.get("nodeAffinity"),
    )
    if node_affinity == old_node_affinity:
        return
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = (node_affinity or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    old_required = (old_node_affinity or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if old_required is not None:
        terms = (required or {}).get("nodeSelectorTerms") or []
        old_terms = old_required.get("nodeSelectorTerms") or []
        if len(terms) != len(old_terms):
            causes.append(
                (
                    f"{path}.nodeSelectorTerms",
                    _INVALID,
                    f"Invalid value: {json.dumps(terms)}: no additions/deletions to non-empty "
                    "NodeSelectorTerms list are allowed",
                )
            )
        else:
            for i, (term, before) in enumerate(zip(terms, old_terms, strict=True)):
                if not _only_added_requirements(term, before):
                    causes.append(
                        (
                            f"{path}.nodeSelectorTerms[{i}]",
                            _INVALID,
                            f"Invalid value: {json.dumps(term)}: only additions are allowed (no "
                            "mutations or deletions)",
                        )
                    )
    # Preferred terms may change freely while gated; the rest of the affinity may not.
    if old_node_affinity is None:
        affinity.pop("nodeAffinity", None)
    else:
        affinity["nodeAffinity"] = old_node_affinity
    munged["affinity"] = affinity
    if not affinity and "affinity" not in old:
        munged.pop("affinity")


def _only_added_requirements(term: Any, before: Any) -> bool:
    if not isinstance(term, dict) or not isinstance(before, dict):
        return bool(term == before)
    for field in ("matchExpressions", "matchFields"):
        now = term.get(field) or []
        if any(requirement not in now for requirement in before.get(field) or []):
            return False
    return True


def _diff(old: Any, new: Any, path: str) -> list[str]:
    """One ``- path: old`` / ``+ path: new`` pair per changed leaf (at most 20 lines)."""
    lines: list[str] = []
    _collect(old, new, path, lines)
    if len(lines) > _MAX_DIFF_LINES:
        lines = [*lines[:_MAX_DIFF_LINES], "  ..."]
    return lines


def _collect(old: Any, new: Any, path: str, lines: list[str]) -> None:
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            _collect(old.get(key), new.get(key), f"{path}.{key}", lines)
        return
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _collect(a, b, f"{path}[{i}]", lines)
        return
    if old is not None:
        lines.append(f"- {path}: {json.dumps(old, sort_keys=True)}")
    if new is not None:
        lines.append(f"+ {path}: {json.dumps(new, sort_keys=True)}")
