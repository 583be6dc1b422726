"""Kubernetes RBAC evaluation over stored Roles, ClusterRoles and their bindings.

Follows upstream's RBAC authorizer (``plugin/pkg/auth/authorizer/rbac``) and its rule
resolver (``pkg/registry/rbac/validation``):

* every ClusterRoleBinding whose subjects include the user is visited, then, for a
  namespaced request, every RoleBinding of that namespace; a binding's role is a
  ClusterRole or (RoleBindings only) a Role of the binding's namespace;
* a subject applies by kind: ``User`` by name, ``Group`` by membership,
  ``ServiceAccount`` when the user is ``system:serviceaccount:<ns>:<name>`` (the
  namespace defaults to the RoleBinding's);
* a rule allows a resource request when its verbs, apiGroups, resources (``*``,
  ``resource/subresource``, ``*/subresource``) and resourceNames (empty: any; a
  request without a name never matches a non-empty list) match, and a non-resource
  request when its verbs and nonResourceURLs (``*``, exact, or a trailing ``*`` as a
  prefix) match;
* the first allowing rule decides: reason ``RBAC: allowed by <binding> ...``; else no
  opinion, with the role references that could not be resolved as the reason.

Members of ``system:masters`` are allowed everything first, as kube-apiserver's
privileged-group authorizer does (reason empty). ``endpoints/reviews.py`` answers
SubjectAccessReviews with ``authorize``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

Obj = dict[str, Any]

MASTERS: Final = "system:masters"
GROUP: Final = "rbac.authorization.k8s.io"
SERVICE_ACCOUNT_PREFIX: Final = "system:serviceaccount:"


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request (or a SubjectAccessReview's spec) asks to do, and who asks."""

    user: str
    groups: tuple[str, ...] = ()
    verb: str = ""
    # A resource request: resource set; a non-resource request: path set.
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    resource_request: bool = True


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


@dataclass(slots=True)
class Policy:
    """The RBAC objects to evaluate against (as stored: plain dicts)."""

    roles: list[Obj] = field(default_factory=list)
    role_bindings: list[Obj] = field(default_factory=list)
    cluster_roles: list[Obj] = field(default_factory=list)
    cluster_role_bindings: list[Obj] = field(default_factory=list)


def _has(values: Iterable[str] | None, value: str) -> bool:
    listed = list(values or ())
    return "*" in listed or value in listed


def verb_matches(rule: Obj, verb: str) -> bool:
    return _has(rule.get("verbs"), verb)


def api_group_matches(rule: Obj, group: str) -> bool:
    return _has(rule.get("apiGroups"), group)


def resource_matches(rule: Obj, combined: str, subresource: str) -> bool:
    for pattern in rule.get("resources") or ():
        if pattern in ("*", combined):
            return True
        # "*/status" matches the status subresource of every resource.
        if subresource and pattern == "*/" + subresource:
            return True
    return False


def resource_name_matches(rule: Obj, name: str) -> bool:
    names = rule.get("resourceNames") or ()
    return not names or name in names


def non_resource_url_matches(rule: Obj, path: str) -> bool:
    for pattern in rule.get("nonResourceURLs") or ():
        if pattern in ("*", path):
            return True
        if pattern.endswith("*") and path.startswith(pattern[:-1]):
            return True
    return False


def rule_allows(attrs: Attributes, rule: Obj) -> bool:
    if not verb_matches(rule, attrs.verb):
        return False
    if not attrs.resource_request:
        return non_resource_url_matches(rule, attrs.path)
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    return (
        api_group_matches(rule, attrs.group)
        and resource_matches(rule, combined, attrs.subresource)
        and resource_name_matches(rule, attrs.name)
    )


def subject_applies(attrs: Attributes, subject: Obj, namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name", "")
    if kind == "User":
        return bool(attrs.user == name)
    if kind == "Group":
        return name in attrs.groups
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        if not sa_namespace:
            return False
        return attrs.user == f"{SERVICE_ACCOUNT_PREFIX}{sa_namespace}:{name}"
    return False


def _describe_subject(subject: Obj, binding_namespace: str) -> str:
    kind, name = subject.get("kind", ""), subject.get("name", "")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or binding_namespace}"'
    return f'{kind} "{name}"'


def _find(objs: Sequence[Obj], name: str, namespace: str = "") -> Obj | None:
    for obj in objs:
        meta = obj.get("metadata") or {}
        if meta.get("name") == name and (meta.get("namespace") or "") == namespace:
            return obj
    return None


def _role_rules(policy: Policy, ref: Obj, namespace: str) -> tuple[list[Obj], str]:
    """The rules of a binding's roleRef, or an error why there are none."""
    kind, name = ref.get("kind"), ref.get("name", "")
    if kind == "Role":
        role = _find(policy.roles, name, namespace) if namespace else None
        if role is None:
            return [], f'role.{GROUP} "{name}" not found'
    elif kind == "ClusterRole":
        role = _find(policy.cluster_roles, name)
        if role is None:
            return [], f'clusterrole.{GROUP} "{name}" not found'
    else:
        return [], f'unsupported role reference kind: "{kind}"'
    return list(role.get("rules") or ()), ""


def authorize(policy: Policy, attrs: Attributes) -> Decision:
    if MASTERS in attrs.groups:
        return Decision(True)
    errors: list[str] = []
    bindings: list[tuple[str, Obj]] = [("", b) for b in policy.cluster_role_bindings]
    if attrs.namespace:
        bindings += [
            (attrs.namespace, b)
            for b in policy.role_bindings
            if (b.get("metadata") or {}).get("namespace") == attrs.namespace
        ]
    for namespace, binding in bindings:
        subject = next(
            (s for s in binding.get("subjects") or () if subject_applies(attrs, s, namespace)),
            None,
        )
        if subject is None:
            continue
        ref = binding.get("roleRef") or {}
        rules, error = _role_rules(policy, ref, namespace)
        if error:
            errors.append(error)
            continue
        for rule in rules:
            if rule_allows(attrs, rule):
                meta = binding.get("metadata") or {}
                what = (
                    f'RoleBinding "{meta.get("name", "")}/{namespace}"'
                    if namespace
                    else f'ClusterRoleBinding "{meta.get("name", "")}"'
                )
                return Decision(
                    True,
                    f'RBAC: allowed by {what} of {ref.get("kind", "")} "{ref.get("name", "")}" '
                    f"to {_describe_subject(subject, namespace)}",
                )
    if not errors:
        return Decision(False)
    text = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return Decision(False, f"RBAC: {text}")
