"""The ClusterRole and Role allow every API call troupe makes, and nothing else.

``API_CALLS`` is the list of requests ``troupe.scheduler.kube`` sends (see its module
docstrings and ``client.py``), as data: verb, API group, resource, subresource,
namespace and name. The evaluator below follows Kubernetes RBAC's rule matching
(``rbac/v1`` ``PolicyRule``: ``*`` wildcards, ``resource/subresource`` strings,
``resourceNames`` never matching a create or a list, ``nonResourceURLs`` with a
trailing ``*`` as a prefix).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from tests.manifests.manifest_files import NAMESPACE, installed, scheduler_config_text

SERVICE_ACCOUNT = ("troupe-system", "troupe-scheduler")
LEASE = yaml.safe_load(scheduler_config_text())["leaderElection"]


@dataclass(frozen=True)
class Call:
    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""  # "" for cluster-scoped or all-namespaces requests
    name: str = ""  # "" when the request names no object (create, list, watch)
    path: str = ""  # a non-resource URL; then the fields above are unused

    def __str__(self) -> str:
        if self.path:
            return f"{self.verb} {self.path}"
        res = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f" in {self.namespace}" if self.namespace else ""
        name = f" {self.name!r}" if self.name else ""
        return f"{self.verb} {res}.{self.group or 'core'}{name}{where}"


GANG_KINDS = [
    ("scheduling.x-k8s.io", "podgroups", True),  # scheduler-plugins PodGroup, status written
    ("scheduling.k8s.io", "workloads", False),  # 1.35 Workload
    ("scheduling.k8s.io", "podgroups", True),  # 1.36 PodGroup, PodGroupScheduled written
]

API_CALLS: list[Call] = [
    Call("get", path="/version"),  # check_reachable
    Call("get", path="/apis"),  # served_gang_apis
    Call("get", path="/apis/scheduling.x-k8s.io/v1alpha1"),
    Call("get", path="/apis/scheduling.k8s.io/v1alpha1"),
    Call("get", path="/apis/scheduling.k8s.io/v1alpha2"),
    Call("list", resource="pods"),
    Call("watch", resource="pods"),
    Call("get", resource="pods", namespace="ml", name="train-0"),
    Call("delete", resource="pods", namespace="ml", name="victim"),
    Call("create", resource="pods", subresource="binding", namespace="ml", name="train-0"),
    Call("patch", resource="pods", subresource="status", namespace="ml", name="train-0"),
    Call("create", resource="pods", subresource="eviction", namespace="ml", name="victim"),
    Call("list", resource="nodes"),
    Call("watch", resource="nodes"),
    Call("list", group="scheduling.k8s.io", resource="priorityclasses"),
    Call("watch", group="scheduling.k8s.io", resource="priorityclasses"),
    Call("create", group="events.k8s.io", resource="events", namespace="ml"),
    Call("patch", group="events.k8s.io", resource="events", namespace="ml", name="train-0.1"),
    # Leader election: its own Lease only.
    Call(
        "get",
        "coordination.k8s.io",
        "leases",
        "",
        LEASE["resourceNamespace"],
        LEASE["resourceName"],
    ),
    Call("create", "coordination.k8s.io", "leases", "", LEASE["resourceNamespace"]),
    Call(
        "update",
        "coordination.k8s.io",
        "leases",
        "",
        LEASE["resourceNamespace"],
        LEASE["resourceName"],
    ),
]
for _group, _plural, _writes_status in GANG_KINDS:
    API_CALLS += [Call("list", _group, _plural), Call("watch", _group, _plural)]
    if _writes_status:
        API_CALLS.append(Call("patch", _group, _plural, "status", "ml", "train"))


def _matches(values: list[str], value: str) -> bool:
    return "*" in values or value in values


def _path_matches(patterns: list[str], path: str) -> bool:
    return any(
        p == "*" or p == path or (p.endswith("*") and path.startswith(p[:-1])) for p in patterns
    )


def rule_allows(rule: dict[str, Any], call: Call) -> bool:
    if call.path:
        return (
            "nonResourceURLs" in rule
            and _matches(rule["verbs"], call.verb)
            and (_path_matches(rule["nonResourceURLs"], call.path))
        )
    if "nonResourceURLs" in rule:
        return False
    resource = f"{call.resource}/{call.subresource}" if call.subresource else call.resource
    names = rule.get("resourceNames") or []
    return (
        _matches(rule["verbs"], call.verb)
        and _matches(rule.get("apiGroups", []), call.group)
        and _matches(rule.get("resources", []), resource)
        and (not names or (bool(call.name) and call.name in names))
    )


def granted_rules(objects: list[dict[str, Any]]) -> list[tuple[str | None, dict[str, Any]]]:
    """(namespace the rule applies in, None for everywhere; rule) for the service account."""
    roles = {
        (o["kind"], o["metadata"].get("namespace")): o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    by_name = {(kind, ns, o["metadata"]["name"]): o for (kind, ns), o in roles.items()}
    out: list[tuple[str | None, dict[str, Any]]] = []
    for b in objects:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subjects = {
            (s.get("namespace"), s["name"]) for s in b["subjects"] if s["kind"] == "ServiceAccount"
        }
        if SERVICE_ACCOUNT not in subjects:
            continue
        ref = b["roleRef"]
        ns = b["metadata"].get("namespace")
        role_ns = ns if ref["kind"] == "Role" else None
        role = by_name.get((ref["kind"], role_ns, ref["name"]))
        assert role is not None, f"{b['kind']} {b['metadata']['name']} refers to a missing role"
        out += [(ns, rule) for rule in role["rules"]]
    return out


def allowed(rules: list[tuple[str | None, dict[str, Any]]], call: Call) -> bool:
    return any(
        (ns is None or ns == call.namespace) and rule_allows(rule, call) for ns, rule in rules
    )


RULES = granted_rules([m.doc for m in installed()])


@pytest.mark.parametrize("call", API_CALLS, ids=str)
def test_troupe_may_make_the_call(call: Call) -> None:
    assert allowed(RULES, call)


@pytest.mark.parametrize(
    "call",
    [
        Call("get", resource="secrets", namespace="ml", name="token"),
        Call("create", resource="pods", namespace="ml"),
        Call("update", resource="pods", namespace="ml", name="train-0"),
        Call("patch", resource="nodes", name="node-1"),
        Call("create", resource="events", namespace="ml"),  # core/v1 Events are not written
        Call("create", resource="pods", subresource="exec", namespace="ml", name="train-0"),
        Call("update", "scheduling.x-k8s.io", "podgroups", "", "ml", "train"),
        Call("delete", "coordination.k8s.io", "leases", "", NAMESPACE, "troupe-scheduler"),
        Call("update", "coordination.k8s.io", "leases", "", NAMESPACE, "kube-scheduler"),
        Call("get", "coordination.k8s.io", "leases", "", "kube-system", "troupe-scheduler"),
        Call("create", "coordination.k8s.io", "leases", "", "kube-system"),
        Call("get", path="/metrics"),
    ],
    ids=str,
)
def test_troupe_may_not_make_the_call(call: Call) -> None:
    assert not allowed(RULES, call)


def _grants(rule: dict[str, Any]) -> list[Call]:
    """Each verb x group x resource (or verb x URL pattern) the rule grants."""
    if "nonResourceURLs" in rule:
        return [Call(v, path=p) for v in rule["verbs"] for p in rule["nonResourceURLs"]]
    return [
        Call(verb, group, *res.partition("/")[::2])
        for verb in rule["verbs"]
        for group in rule["apiGroups"]
        for res in rule["resources"]
    ]


def _used(grant: Call) -> bool:
    if grant.path:
        return any(c.verb == grant.verb and _path_matches([grant.path], c.path) for c in API_CALLS)
    return any(
        (c.verb, c.group, c.resource, c.subresource)
        == (grant.verb, grant.group, grant.resource, grant.subresource)
        for c in API_CALLS
    )


@pytest.mark.parametrize(
    "grant",
    [g for _, rule in RULES for g in _grants(rule)],
    ids=lambda g: f"{g} is a call troupe makes",
)
def test_every_grant_is_used(grant: Call) -> None:
    assert "*" not in (grant.verb, grant.group, grant.resource)
    assert _used(grant)


def test_lease_rules_are_where_the_profile_puts_the_lease() -> None:
    leases = [(ns, rule) for ns, rule in RULES if "leases" in rule.get("resources", [])]
    assert {ns for ns, _ in leases} == {LEASE["resourceNamespace"]}
    named = [rule for _, rule in leases if rule.get("resourceNames")]
    assert [rule["resourceNames"] for rule in named] == [[LEASE["resourceName"]]]
    unnamed = [rule for _, rule in leases if not rule.get("resourceNames")]
    assert [rule["verbs"] for rule in unnamed] == [["create"]]
