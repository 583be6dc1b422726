"""RBAC evaluation of the embedded API server (``troupe.sim.apiserver.auth.authorizer``), as
upstream's RBAC authorizer decides: wildcards, subresources, resource names,
non-resource URL prefixes, subjects by kind, namespaced RoleBindings, missing roles."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.sim.apiserver.auth.authorizer import Attributes, Policy, authorize, rule_allows

GROUP = "rbac.authorization.k8s.io"


def cluster_role(name: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "rules": list(rules)}


def role(namespace: str, name: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "rules": list(rules)}


def binding(
    name: str, kind: str, role_name: str, *subjects: dict[str, Any], namespace: str = ""
) -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "metadata": meta,
        "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role_name},
        "subjects": list(subjects),
    }


def user(name: str) -> dict[str, str]:
    return {"kind": "User", "name": name}


def group(name: str) -> dict[str, str]:
    return {"kind": "Group", "name": name}


def sa(name: str, namespace: str = "") -> dict[str, str]:
    return {
        "kind": "ServiceAccount",
        "name": name,
        **({"namespace": namespace} if namespace else {}),
    }


DEBUG = {"nonResourceURLs": ["/debug/troupe/explain"], "verbs": ["get"]}


def path(who: str, path: str, verb: str = "get", groups: tuple[str, ...] = ()) -> Attributes:
    return Attributes(who, groups, verb=verb, path=path, resource_request=False)


def res(
    who: str,
    verb: str,
    resource: str,
    *,
    api_group: str = "",
    subresource: str = "",
    namespace: str = "",
    name: str = "",
    groups: tuple[str, ...] = (),
) -> Attributes:
    return Attributes(
        who,
        groups,
        verb=verb,
        group=api_group,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
    )


def test_a_cluster_role_bound_to_a_user_allows_that_user_only() -> None:
    policy = Policy(
        cluster_roles=[cluster_role("explain", DEBUG)],
        cluster_role_bindings=[binding("explain-alice", "ClusterRole", "explain", user("alice"))],
    )
    allowed = authorize(policy, path("alice", "/debug/troupe/explain"))
    assert allowed.allowed
    assert allowed.reason == (
        'RBAC: allowed by ClusterRoleBinding "explain-alice" of ClusterRole "explain" '
        'to User "alice"'
    )
    assert not authorize(policy, path("bob", "/debug/troupe/explain")).allowed
    assert not authorize(policy, path("alice", "/debug/troupe/explain", verb="post")).allowed
    assert not authorize(policy, path("alice", "/debug/troupe/other")).allowed


def test_groups_and_service_accounts_as_subjects() -> None:
    policy = Policy(
        cluster_roles=[cluster_role("explain", DEBUG)],
        cluster_role_bindings=[
            binding("by-group", "ClusterRole", "explain", group("sre")),
            binding("by-sa", "ClusterRole", "explain", sa("tool", "ops")),
            binding("sa-without-namespace", "ClusterRole", "explain", sa("lost")),
        ],
    )
    assert authorize(policy, path("carol", "/debug/troupe/explain", groups=("sre",))).allowed
    assert not authorize(policy, path("sre", "/debug/troupe/explain")).allowed  # a user named so
    decision = authorize(policy, path("system:serviceaccount:ops:tool", "/debug/troupe/explain"))
    assert decision.allowed
    assert decision.reason.endswith('to ServiceAccount "tool/ops"')
    other = authorize(policy, path("system:serviceaccount:dev:tool", "/debug/troupe/explain"))
    assert not other.allowed
    # A cluster-wide binding of a service account with no namespace matches nobody.
    assert not authorize(
        policy, path("system:serviceaccount::lost", "/debug/troupe/explain")
    ).allowed


def test_system_masters_may_do_anything() -> None:
    decision = authorize(Policy(), res("root", "delete", "nodes", groups=("system:masters",)))
    assert decision.allowed and decision.reason == ""


@pytest.mark.parametrize(
    ("rule", "attrs", "allowed"),
    [
        ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
         res("u", "get", "pods"), True),
        ({"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]},
         res("u", "watch", "pods"), True),
        ({"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]},
         res("u", "get", "pods", api_group="example.com"), True),
        ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
         res("u", "get", "pods", api_group="apps"), False),
        ({"apiGroups": [""], "resources": ["*"], "verbs": ["get"]},
         res("u", "get", "pods", subresource="log"), True),
        ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
         res("u", "get", "pods", subresource="status"), False),
        ({"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get"]},
         res("u", "get", "pods", subresource="status"), True),
        ({"apiGroups": [""], "resources": ["*/status"], "verbs": ["get"]},
         res("u", "get", "nodes", subresource="status"), True),
        ({"apiGroups": [""], "resources": ["*/status"], "verbs": ["get"]},
         res("u", "get", "nodes"), False),
        ({"apiGroups": [""], "resources": ["pods"], "resourceNames": ["web"], "verbs": ["get"]},
         res("u", "get", "pods", name="web"), True),
        ({"apiGroups": [""], "resources": ["pods"], "resourceNames": ["web"], "verbs": ["get"]},
         res("u", "get", "pods", name="db"), False),
        # A list names no object: a rule restricted to names never allows it.
        ({"apiGroups": [""], "resources": ["pods"], "resourceNames": ["web"], "verbs": ["list"]},
         res("u", "list", "pods"), False),
        ({"nonResourceURLs": ["/debug/*"], "verbs": ["get"]}, path("u", "/debug/troupe/explain"),
         True),
        ({"nonResourceURLs": ["/debug/troupe"], "verbs": ["get"]},
         path("u", "/debug/troupe/explain"), False),
        ({"nonResourceURLs": ["*"], "verbs": ["get"]}, path("u", "/anything"), True),
        # Resource rules never allow a non-resource request, and the other way round.
        ({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, path("u", "/metrics"), False),
        ({"nonResourceURLs": ["*"], "verbs": ["*"]}, res("u", "get", "pods"), False),
    ],
)  # fmt: skip
def test_rule_matching(rule: dict[str, Any], attrs: Attributes, allowed: bool) -> None:
    assert rule_allows(attrs, rule) is allowed


def test_role_bindings_apply_in_their_namespace_only() -> None:
    read = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}
    policy = Policy(
        roles=[role("team-a", "reader", read)],
        role_bindings=[
            binding("read", "Role", "reader", user("alice"), namespace="team-a"),
            # A RoleBinding may grant a ClusterRole's rules, in its namespace only.
            binding("view", "ClusterRole", "viewer", sa("ci"), namespace="team-b"),
        ],
        cluster_roles=[cluster_role("viewer", read)],
    )
    assert authorize(policy, res("alice", "list", "pods", namespace="team-a")).allowed
    assert not authorize(policy, res("alice", "list", "pods", namespace="team-b")).allowed
    assert not authorize(policy, res("alice", "list", "pods")).allowed  # cluster-wide
    # A service account subject without a namespace is the binding's namespace's.
    decision = authorize(
        policy, res("system:serviceaccount:team-b:ci", "get", "pods", namespace="team-b")
    )
    assert decision.allowed
    assert decision.reason == (
        'RBAC: allowed by RoleBinding "view/team-b" of ClusterRole "viewer" '
        'to ServiceAccount "ci/team-b"'
    )
    assert not authorize(
        policy, res("system:serviceaccount:team-a:ci", "get", "pods", namespace="team-b")
    ).allowed


def test_a_missing_role_is_the_reason_of_a_denial() -> None:
    policy = Policy(
        role_bindings=[binding("read", "Role", "gone", user("alice"), namespace="team-a")],
        cluster_role_bindings=[binding("x", "ClusterRole", "absent", user("alice"))],
    )
    decision = authorize(policy, res("alice", "get", "pods", namespace="team-a"))
    assert not decision.allowed
    assert decision.reason == (
        'RBAC: [clusterrole.rbac.authorization.k8s.io "absent" not found, '
        'role.rbac.authorization.k8s.io "gone" not found]'
    )
    only = authorize(policy, res("alice", "get", "pods"))
    assert only.reason == 'RBAC: clusterrole.rbac.authorization.k8s.io "absent" not found'


# A model of the rule matching, written from the PolicyRule documentation, checked
# against the evaluator on random rules and requests.
WORDS = st.sampled_from(["get", "list", "pods", "nodes", "apps", "", "status", "web", "*"])


def _in(values: list[str], value: str) -> bool:
    return "*" in values or value in values


@settings(max_examples=300, deadline=None)
@given(
    verbs=st.lists(st.sampled_from(["get", "list", "*"]), max_size=2),
    groups=st.lists(st.sampled_from(["", "apps", "*"]), max_size=2),
    resources=st.lists(
        st.sampled_from(["pods", "nodes", "pods/status", "*/status", "*"]), max_size=2
    ),
    names=st.lists(st.sampled_from(["web", "db"]), max_size=2),
    verb=st.sampled_from(["get", "list"]),
    api_group=st.sampled_from(["", "apps"]),
    resource=st.sampled_from(["pods", "nodes"]),
    subresource=st.sampled_from(["", "status", "log"]),
    name=st.sampled_from(["", "web", "db"]),
)
def test_resource_rules_match_the_model(
    verbs: list[str],
    groups: list[str],
    resources: list[str],
    names: list[str],
    verb: str,
    api_group: str,
    resource: str,
    subresource: str,
    name: str,
) -> None:
    rule = {"verbs": verbs, "apiGroups": groups, "resources": resources, "resourceNames": names}
    attrs = res("u", verb, resource, api_group=api_group, subresource=subresource, name=name)
    combined = f"{resource}/{subresource}" if subresource else resource
    resource_ok = (
        "*" in resources
        or combined in resources
        or bool(subresource and f"*/{subresource}" in resources)
    )
    expected = (
        _in(verbs, verb) and _in(groups, api_group) and resource_ok and (not names or name in names)
    )
    assert rule_allows(attrs, rule) is expected


@settings(max_examples=300, deadline=None)
@given(
    patterns=st.lists(
        st.sampled_from(["/debug/*", "/debug/troupe/explain", "/debug", "/d*", "*", "/metrics"]),
        max_size=3,
    ),
    request_path=st.sampled_from(["/debug/troupe/explain", "/debug", "/metrics", "/dx"]),
)
def test_non_resource_urls_match_the_model(patterns: list[str], request_path: str) -> None:
    expected = any(
        p == "*" or p == request_path or (p.endswith("*") and request_path.startswith(p[:-1]))
        for p in patterns
    )
    rule = {"verbs": ["get"], "nonResourceURLs": patterns}
    assert rule_allows(path("u", request_path), rule) is expected


@settings(max_examples=200, deadline=None)
@given(
    member=st.lists(st.sampled_from(["sre", "dev", "ops"]), max_size=3, unique=True),
    bound=st.sampled_from(["sre", "dev", "ops"]),
    namespace=st.sampled_from(["", "team-a", "team-b"]),
    binding_namespace=st.sampled_from(["team-a", "team-b"]),
)
def test_a_group_binding_allows_exactly_its_members_where_it_applies(
    member: list[str], bound: str, namespace: str, binding_namespace: str
) -> None:
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}
    policy = Policy(
        cluster_roles=[cluster_role("read", rule)],
        role_bindings=[
            binding("b", "ClusterRole", "read", group(bound), namespace=binding_namespace)
        ],
    )
    attrs = res("someone", "get", "pods", namespace=namespace, groups=tuple(member))
    expected = bound in member and namespace == binding_namespace
    assert authorize(policy, attrs).allowed is expected
