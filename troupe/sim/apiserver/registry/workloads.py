"""Validation of the Kubernetes 1.37 Workload at ``v1beta1`` and ``v1alpha3``.

``WorkloadStrategy`` refuses a write that upstream's validation refuses, with a 422
Invalid whose causes are upstream's field errors (the declarative tags of
staging/src/k8s.io/api/scheduling/v1beta1/types.go and v1alpha3/types.go):

- ``v1beta1``: ``spec.podGroupTemplates`` has 1 to 8 templates, each checked as
  ``podgroups`` checks a PodGroup's fields;
- ``v1alpha3`` (KEP-6012): exactly one of ``podGroupTemplates`` |
  ``compositePodGroupTemplates`` at the top; a composite template has a name, a
  ``schedulingPolicy`` (``basic`` | ``gang`` with ``minGroupCount`` at least 1), a
  ``priority`` at most 1000000000 and children in ``podGroupTemplates`` and
  ``compositePodGroupTemplates`` (8 at most each); the tree of templates is at most 4
  levels deep (the top list is level 1); template names are DNS labels, unique in
  their list;
- on update: ``controllerRef`` cannot change, no list of templates may gain or lose an
  item, the policy's kind is fixed, a template's ``priorityClassName`` and
  ``priority`` (and a PodGroup template's other immutable fields) cannot change.

Writes through ``v1alpha2`` are stored as given, as before. A write through ``v1beta1``
or ``v1alpha2``, which cannot show ``compositePodGroupTemplates``, keeps the stored ones.
Objects are checked in the stored shape; ``kinds.py`` declares the strategy.
"""

from __future__ import annotations

import re
from typing import Any, Final

from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.composites import composite_policy, priority_at_most_highest
from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.registry.podgroups import (
    MAX_TEMPLATES,
    TEMPLATE_IMMUTABLE,
    VALIDATED_VERSION,
    Cause,
    forbidden,
    group_fields,
    immutable,
    invalid,
    pod_group_policy,
    policy_update,
    refuse,
    required,
    show,
    spec_of,
    too_many,
    union,
)
from troupe.sim.apiserver.storage.podgroup_conversion import COMPOSITE_TEMPLATES
from troupe.sim.apiserver.storage.store import Obj, Store

COMPOSITES_VERSION: Final = "v1alpha3"
TEMPLATES: Final = "podGroupTemplates"
MAX_TREE_DEPTH: Final = 4  # v1alpha3.WorkloadMaxTreeDepth
_VALIDATED: Final = (VALIDATED_VERSION, COMPOSITES_VERSION)
_COMPOSITE_IMMUTABLE: Final = ("priorityClassName", "priority")
_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_LABEL_MAX: Final = 63
_DNS_LABEL_HELP: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
    "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
    "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


class WorkloadStrategy(GenericStrategy):
    def prepare_create(self, store: Store, rt: ResourceType, obj: Obj) -> None:
        if rt.version in _VALIDATED:
            refuse(rt, obj, validate_workload(obj, rt.version))

    def prepare_update(
        self, store: Store, rt: ResourceType, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        if subresource is not None:
            return
        spec, old_spec = spec_of(new), spec_of(old)
        if rt.version != COMPOSITES_VERSION and old_spec.get(COMPOSITE_TEMPLATES):
            # The view cannot show them, so the write did not mean to remove them.
            new.setdefault("spec", spec)[COMPOSITE_TEMPLATES] = old_spec[COMPOSITE_TEMPLATES]
        if rt.version not in _VALIDATED:
            return
        causes = validate_workload(new, rt.version)
        causes += immutable("spec", spec, old_spec, ("controllerRef",))
        causes += _templates_update(
            f"spec.{TEMPLATES}", spec.get(TEMPLATES), old_spec.get(TEMPLATES)
        )
        causes += _composites_update(
            f"spec.{COMPOSITE_TEMPLATES}",
            spec.get(COMPOSITE_TEMPLATES),
            old_spec.get(COMPOSITE_TEMPLATES),
        )
        refuse(rt, new, causes)


def validate_workload(obj: Obj, version: str = VALIDATED_VERSION) -> list[Cause]:
    """Upstream's field errors for a Workload written through ``version`` (in its
    stored shape)."""
    if not isinstance(obj.get("spec"), dict):
        return [required("spec")]
    spec = obj["spec"]
    if version != COMPOSITES_VERSION and not spec.get(COMPOSITE_TEMPLATES):
        templates = spec.get(TEMPLATES)
        if not templates:
            return [required(f"spec.{TEMPLATES}", "must have at least one item")]
        return _pod_group_templates(f"spec.{TEMPLATES}", templates)
    chosen_lists = {m: spec[m] for m in (TEMPLATES, COMPOSITE_TEMPLATES) if spec.get(m)}
    causes, chosen = union("spec", chosen_lists, (TEMPLATES, COMPOSITE_TEMPLATES))
    if chosen == TEMPLATES:
        causes += _pod_group_templates(f"spec.{TEMPLATES}", spec[TEMPLATES])
    elif chosen == COMPOSITE_TEMPLATES:
        causes += _composite_templates(f"spec.{COMPOSITE_TEMPLATES}", spec[chosen], depth=1)
    return causes


def _list_items(path: str, templates: Any) -> tuple[list[Cause], list[tuple[str, Obj]]]:
    """The checks every list of templates shares (a list, 8 items at most, each an
    object with a unique DNS-label name): (causes, the (path, template) to check)."""
    if not isinstance(templates, list):
        return [invalid(path, templates, "must be a list")], []
    if len(templates) > MAX_TEMPLATES:
        return [too_many(path, len(templates), MAX_TEMPLATES)], []
    causes: list[Cause] = []
    items: list[tuple[str, Obj]] = []
    seen: set[str] = set()
    for index, template in enumerate(templates):
        at = f"{path}[{index}]"
        if not isinstance(template, dict):
            causes.append(invalid(at, template, "must be an object"))
            continue
        name = template.get("name")
        if not name:
            causes.append(required(f"{at}.name"))
        elif not _is_dns_label(name):
            causes.append(invalid(f"{at}.name", name, _dns_label_detail(name)))
        elif name in seen:
            causes.append((f"{at}.name", "FieldValueDuplicate", f"Duplicate value: {show(name)}"))
        else:
            seen.add(name)
        items.append((at, template))
    return causes, items


def _pod_group_templates(path: str, templates: Any) -> list[Cause]:
    causes, items = _list_items(path, templates)
    for at, template in items:
        found, kind = pod_group_policy(f"{at}.schedulingPolicy", template.get("schedulingPolicy"))
        causes += found + group_fields(at, template, kind)
    return causes


def _composite_templates(path: str, templates: Any, depth: int) -> list[Cause]:
    """``depth``: the level of this list in the tree (the top list is 1)."""
    causes, items = _list_items(path, templates)
    for at, template in items:
        causes += composite_policy(f"{at}.schedulingPolicy", template.get("schedulingPolicy"))
        causes += priority_at_most_highest(f"{at}.priority", template.get("priority"))
        for field in (TEMPLATES, COMPOSITE_TEMPLATES):
            children = template.get(field)
            if not children:
                continue
            if depth >= MAX_TREE_DEPTH:
                detail = f"the tree of templates may be at most {MAX_TREE_DEPTH} levels deep"
                causes.append(forbidden(f"{at}.{field}", detail))
            elif field == TEMPLATES:
                causes += _pod_group_templates(f"{at}.{field}", children)
            else:
                causes += _composite_templates(f"{at}.{field}", children, depth + 1)
    return causes


def _matched(path: str, new: Any, old: Any) -> tuple[list[Cause], list[tuple[str, Obj, Obj]]]:
    """+k8s:update=NoAddItem,NoRemoveItem on a list of templates keyed by name:
    (causes, the (path, new, old) of the templates in both)."""
    new_by_name, old_by_name = _by_name(new), _by_name(old)
    causes = [
        forbidden(path, f'may not add item "{name}"')
        for name in sorted(set(new_by_name) - set(old_by_name))
    ]
    causes += [
        forbidden(path, f'may not remove item "{name}"')
        for name in sorted(set(old_by_name) - set(new_by_name))
    ]
    pairs = [
        (f"{path}[{new_by_name[name][0]}]", new_by_name[name][1], old_by_name[name][1])
        for name in sorted(set(new_by_name) & set(old_by_name))
    ]
    return causes, pairs


def _templates_update(path: str, new: Any, old: Any) -> list[Cause]:
    causes, pairs = _matched(path, new, old)
    for at, template, before in pairs:
        causes += policy_update(
            f"{at}.schedulingPolicy",
            template.get("schedulingPolicy"),
            before.get("schedulingPolicy"),
        )
        causes += immutable(at, template, before, TEMPLATE_IMMUTABLE)
    return causes


def _composites_update(path: str, new: Any, old: Any) -> list[Cause]:
    causes, pairs = _matched(path, new, old)
    for at, template, before in pairs:
        causes += policy_update(
            f"{at}.schedulingPolicy",
            template.get("schedulingPolicy"),
            before.get("schedulingPolicy"),
        )
        causes += immutable(at, template, before, _COMPOSITE_IMMUTABLE)
        causes += _templates_update(
            f"{at}.{TEMPLATES}", template.get(TEMPLATES), before.get(TEMPLATES)
        )
        causes += _composites_update(
            f"{at}.{COMPOSITE_TEMPLATES}",
            template.get(COMPOSITE_TEMPLATES),
            before.get(COMPOSITE_TEMPLATES),
        )
    return causes


def _by_name(templates: Any) -> dict[str, tuple[int, Obj]]:
    if not isinstance(templates, list):
        return {}
    return {
        t["name"]: (i, t) for i, t in enumerate(templates) if isinstance(t, dict) and t.get("name")
    }


def _is_dns_label(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= _DNS_LABEL_MAX
        and _DNS_LABEL.fullmatch(value) is not None
    )


def _dns_label_detail(value: object) -> str:
    if isinstance(value, str) and len(value) > _DNS_LABEL_MAX:
        return f"must be no more than {_DNS_LABEL_MAX} characters"
    return _DNS_LABEL_HELP
