"""The ClusterRole and Role allow every API call troupe makes, and nothing else.

The calls are recorded from a real run (``recorded_run``, tests/manifests/
production_run.py): every request the embedded API server saw from troupe, turned
into verb, API group, resource, subresource, namespace and name the way the API
server's ``RequestInfoFactory`` does (a list or watch with ``fieldSelector``
``metadata.name=<n>`` names ``<n>``). The evaluator below follows Kubernetes RBAC's
rule matching (``rbac/v1`` ``PolicyRule``: ``*`` wildcards, ``resource/subresource``
strings, ``resourceNames`` never matching a create or a list of a whole collection,
``nonResourceURLs`` with a trailing ``*`` as a prefix). A grant the run does not
exercise is listed in ``NOT_EXERCISED`` with the code path that needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from tests.manifests.manifest_files import NAMESPACE, installed, scheduler_config_text
from tests.manifests.production_run import ProductionRun, Request

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


def call_of(request: Request) -> Call:
    """The RBAC attributes of one request (apiserver ``RequestInfoFactory``)."""
    parts = [p for p in request.path.split("/") if p]
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return Call("get" if request.method == "GET" else request.method.lower(), path=request.path)
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        if len(parts) < 4:  # /apis/<group>/<version>: discovery, a non-resource URL
            return Call("get", path=request.path)
        group, rest = parts[1], parts[3:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    watching = request.query.get("watch", "").lower() in ("true", "1")
    if request.method == "GET" and not name:
        name = _selected_name(request.query.get("fieldSelector", ""))
        if name:
            return Call("watch" if watching else "list", group, resource, "", namespace, name)
    verb = {
        "GET": "get" if name else ("watch" if watching else "list"),
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if name else "deletecollection",
    }[request.method]
    return Call(verb, group, resource, subresource, namespace, name)


def _selected_name(selector: str) -> str:
    """The name a field selector requires exactly (``metadata.name=<n>`` or ``==``),
    as ``RequestInfoFactory`` reads it for a list or watch; "" if none."""
    for term in selector.split(","):
        key, sep, value = term.partition("==") if "==" in term else term.partition("=")
        if sep and key.strip() == "metadata.name" and not key.endswith("!"):
            return value.strip()
    return ""


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/pods", {"watch": "true"}, Call("watch", resource="pods")),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/troupe-system/leases",
            {"watch": "1", "fieldSelector": "metadata.name=l"},
            Call("watch", "coordination.k8s.io", "leases", "", "troupe-system", "l"),
        ),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/troupe-system/leases",
            {"fieldSelector": "metadata.name!=l"},
            Call("list", "coordination.k8s.io", "leases", "", "troupe-system"),
        ),
        ("GET", "/api/v1/nodes", {}, Call("list", resource="nodes")),
        (
            "POST",
            "/api/v1/namespaces/ml/pods/p/binding",
            {},
            Call("create", "", "pods", "binding", "ml", "p"),
        ),
        (
            "PATCH",
            "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups/g/status",
            {},
            Call("patch", "scheduling.x-k8s.io", "podgroups", "status", "ml", "g"),
        ),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/troupe-system/leases/l",
            {},
            Call("update", "coordination.k8s.io", "leases", "", "troupe-system", "l"),
        ),
        (
            "GET",
            "/apis/scheduling.k8s.io/v1alpha2",
            {},
            Call("get", path="/apis/scheduling.k8s.io/v1alpha2"),
        ),
        ("GET", "/version", {}, Call("get", path="/version")),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_requests_map_to_rbac_attributes(
    method: str, path: str, query: dict[str, str], expected: Call
) -> None:
    assert call_of(Request(method, path, query)) == expected


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


def recorded_calls(run: ProductionRun) -> list[Call]:
    return sorted(set(map(call_of, run.requests)), key=str)


def test_every_call_of_a_real_run_is_allowed(recorded_run: ProductionRun) -> None:
    calls = recorded_calls(recorded_run)
    assert len(calls) > 20
    assert [str(c) for c in calls if not allowed(RULES, c)] == []


# What the recorded run must exercise for the checks here to mean anything.
EXERCISED = [
    ("get", "", "/version", ""),
    ("get", "", "/apis", ""),
    ("list", "", "pods", ""),
    ("watch", "", "pods", ""),
    ("create", "", "pods", "binding"),
    ("patch", "", "pods", "status"),
    ("list", "", "nodes", ""),
    ("watch", "", "nodes", ""),
    # The Namespace informer InterPodAffinity's namespaceSelector is matched with.
    ("list", "", "namespaces", ""),
    ("watch", "", "namespaces", ""),
    ("create", "events.k8s.io", "events", ""),
    ("patch", "events.k8s.io", "events", ""),  # a FailedScheduling series
    ("get", "coordination.k8s.io", "leases", ""),
    ("create", "coordination.k8s.io", "leases", ""),
    ("update", "coordination.k8s.io", "leases", ""),
    # The leader's watch of its own Lease (fencing), named by its field selector.
    ("list", "coordination.k8s.io", "leases", ""),
    ("watch", "coordination.k8s.io", "leases", ""),
    ("watch", "scheduling.x-k8s.io", "podgroups", ""),
    ("patch", "scheduling.x-k8s.io", "podgroups", "status"),
    ("watch", "scheduling.k8s.io", "workloads", ""),
    ("watch", "scheduling.k8s.io", "podgroups", ""),
    ("patch", "scheduling.k8s.io", "podgroups", "status"),
    ("watch", "scheduling.k8s.io", "priorityclasses", ""),
    # The PodDisruptionBudget informer preemption reads victims' budgets from.
    ("list", "policy", "poddisruptionbudgets", ""),
    ("watch", "policy", "poddisruptionbudgets", ""),
]


def _key(c: Call) -> tuple[str, str, str, str]:
    return (c.verb, c.group, c.path or c.resource, c.subresource)


@pytest.mark.parametrize("key", EXERCISED, ids=lambda k: " ".join(filter(None, k)))
def test_the_run_exercises_the_call(recorded_run: ProductionRun, key: tuple[str, ...]) -> None:
    assert key in {_key(c) for c in recorded_calls(recorded_run)}


@pytest.mark.parametrize(
    "call",
    [
        Call("get", resource="secrets", namespace="ml", name="token"),
        Call("create", resource="pods", namespace="ml"),
        Call("update", resource="pods", namespace="ml", name="train-0"),
        Call("patch", resource="nodes", name="node-1"),
        Call("create", resource="pods", subresource="exec", namespace="ml", name="train-0"),
        Call("update", "scheduling.x-k8s.io", "podgroups", "", "ml", "train"),
        Call("delete", "coordination.k8s.io", "leases", "", NAMESPACE, "troupe-scheduler"),
        Call("update", "coordination.k8s.io", "leases", "", NAMESPACE, "kube-scheduler"),
        Call("get", "coordination.k8s.io", "leases", "", "kube-system", "troupe-scheduler"),
        Call("create", "coordination.k8s.io", "leases", "", "kube-system"),
        Call("watch", "coordination.k8s.io", "leases", "", NAMESPACE),
        Call("list", "coordination.k8s.io", "leases", "", NAMESPACE, "kube-scheduler"),
        Call("get", path="/metrics"),
        # Storage and devices: read, and write only what PreBind writes.
        Call("create", resource="persistentvolumes"),
        Call("delete", resource="persistentvolumeclaims", namespace="ml", name="data"),
        Call("delete", "resource.k8s.io", "resourceclaims", "", "ml", "gpu"),
        Call("patch", "resource.k8s.io", "resourceclaims", "driver", "ml", "gpu"),
        Call("update", "resource.k8s.io", "resourceslices", "", "", "slice-1"),
        Call("update", "storage.k8s.io", "storageclasses", "", "", "fast"),
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


# The kinds the volume and device plugins watch (troupe.api.watches), by API group.
WATCHED_BY_PLUGINS: dict[str, tuple[str, ...]] = {
    "": ("persistentvolumes", "persistentvolumeclaims"),
    "storage.k8s.io": (
        "storageclasses",
        "csinodes",
        "csidrivers",
        "csistoragecapacities",
        "volumeattachments",
    ),
    "resource.k8s.io": (
        "resourceclaims",
        "resourceslices",
        "deviceclasses",
        "resourceclaimtemplates",
    ),
}

# Grants the recorded run does not exercise, each with the code path that needs it.
NOT_EXERCISED: dict[tuple[str, str, str, str], str] = {
    ("get", "", "pods", ""): (
        "KubeClient.bind reads the pod back after a binding answered 409 on a retry, "
        "to tell its own earlier success from someone else's binding"
    ),
    ("delete", "", "pods", ""): "preemption: KubeClient.delete_pod removes a victim",
    ("create", "", "pods", "eviction"): (
        "preemption: KubeClient.evict_pod evicts a victim through the Eviction API"
    ),
    ("get", "", "nodes", ""): (
        "one-object reads, granted as in kube-scheduler's role for tools run as the "
        "service account; troupe's informers only list and watch"
    ),
    ("get", "scheduling.k8s.io", "priorityclasses", ""): "as nodes: one-object reads",
    ("get", "policy", "poddisruptionbudgets", ""): "as nodes: one-object reads",
    ("get", "scheduling.x-k8s.io", "podgroups", ""): "as nodes: one-object reads",
    ("get", "scheduling.k8s.io", "workloads", ""): "as nodes: one-object reads",
    ("get", "scheduling.k8s.io", "podgroups", ""): "as nodes: one-object reads",
    ("get", "scheduling.k8s.io", "compositepodgroups", ""): "as nodes: one-object reads",
    ("update", "scheduling.x-k8s.io", "podgroups", "status"): (
        "a full status write; troupe merge-patches, kube-scheduler's role grants both"
    ),
    ("update", "scheduling.k8s.io", "podgroups", "status"): (
        "a full status write; troupe merge-patches, kube-scheduler's role grants both"
    ),
    ("create", "", "events", ""): (
        "core/v1 Events: kube-scheduler's recorder may write either group; troupe "
        "writes events.k8s.io/v1"
    ),
    ("patch", "", "events", ""): "core/v1 Events, as create",
    **{
        ("get", "", "/api/*", ""): (
            "API discovery of the core kinds plugins watch (GET /api/v1, "
            "troupe.kube.discovery.served_kinds); no plugin of the recorded profile watches one"
        ),
    },
    **{
        (verb, group, resource, ""): (
            f"the {resource} informer of a plugin that watches them "
            "(troupe.kube.object_informers; the volume and device plugins), not in the "
            "recorded profile"
            if verb != "get"
            else "as nodes: one-object reads (a plugin's PreBind re-reads what it writes)"
        )
        for group, resources in WATCHED_BY_PLUGINS.items()
        for resource in resources
        for verb in ("get", "list", "watch")
    },
    **{
        (verb, "", resource, ""): (
            "VolumeBinding's PreBind: a claim's selected-node annotation, a PV's claimRef "
            "(SchedulerClient.update_object / patch_object)"
        )
        for resource in ("persistentvolumeclaims", "persistentvolumes")
        for verb in ("update", "patch")
    },
    ("update", "resource.k8s.io", "resourceclaims", ""): (
        "DynamicResources' PreBind adds the claim's finalizer (SchedulerClient.update_object)"
    ),
    **{
        (verb, "resource.k8s.io", "resourceclaims", sub): (
            "DynamicResources' PreBind writes status.allocation and reservedFor "
            "(SchedulerClient.update_object_status; from 1.36 also authorized as "
            "resourceclaims/binding)"
        )
        for verb in ("update", "patch")
        for sub in ("status", "binding")
    },
}


def _used(grant: Call, calls: list[Call]) -> bool:
    if grant.path:
        return any(c.verb == grant.verb and _path_matches([grant.path], c.path) for c in calls)
    return any(_key(c) == _key(grant) for c in calls)


GRANTS = [g for _, rule in RULES for g in _grants(rule)]


@pytest.mark.parametrize("grant", GRANTS, ids=lambda g: f"{g} is used or justified")
def test_every_grant_is_used_or_justified(recorded_run: ProductionRun, grant: Call) -> None:
    assert "*" not in (grant.verb, grant.group, grant.resource)
    used = _used(grant, recorded_calls(recorded_run))
    assert used or _key(grant) in NOT_EXERCISED


def test_every_justification_is_for_a_grant() -> None:
    assert set(NOT_EXERCISED) <= {_key(g) for g in GRANTS}


def _each(verbs: str, group: str, resource: str) -> set[tuple[str, str, str, str]]:
    res, _, sub = resource.partition("/")
    return {(verb, group, res, sub) for verb in verbs.split()}


# The deployment contract: exactly these grants, nothing more.
CONTRACT = set().union(
    _each("get list watch delete", "", "pods"),
    _each("create", "", "pods/binding"),
    _each("patch", "", "pods/status"),
    _each("create", "", "pods/eviction"),
    _each("get list watch", "", "nodes"),
    _each("list watch", "", "namespaces"),
    _each("create patch", "", "events"),
    _each("create patch", "events.k8s.io", "events"),
    _each("create get update list watch", "coordination.k8s.io", "leases"),
    _each("get list watch", "scheduling.k8s.io", "priorityclasses"),
    _each("get list watch", "policy", "poddisruptionbudgets"),
    _each("get list watch", "scheduling.x-k8s.io", "podgroups"),
    _each("patch update", "scheduling.x-k8s.io", "podgroups/status"),
    _each("get list watch", "scheduling.k8s.io", "workloads"),
    _each("get list watch", "scheduling.k8s.io", "podgroups"),
    _each("get list watch", "scheduling.k8s.io", "compositepodgroups"),
    _each("patch update", "scheduling.k8s.io", "podgroups/status"),
    *(
        _each("get list watch", group, resource)
        for group, resources in WATCHED_BY_PLUGINS.items()
        for resource in resources
    ),
    _each("update patch", "", "persistentvolumeclaims"),
    _each("update patch", "", "persistentvolumes"),
    _each("update", "resource.k8s.io", "resourceclaims"),
    _each("update patch", "resource.k8s.io", "resourceclaims/status"),
    _each("update patch", "resource.k8s.io", "resourceclaims/binding"),
    {("get", "", path, "") for path in ("/version", "/api/*", "/apis", "/apis/*")},
)


def test_the_roles_grant_exactly_the_contract() -> None:
    assert {_key(g) for g in GRANTS} == CONTRACT


def test_lease_rules_are_where_the_profile_puts_the_lease() -> None:
    leases = [(ns, rule) for ns, rule in RULES if "leases" in rule.get("resources", [])]
    assert {ns for ns, _ in leases} == {LEASE["resourceNamespace"]}
    named = [rule for _, rule in leases if rule.get("resourceNames")]
    assert [rule["resourceNames"] for rule in named] == [[LEASE["resourceName"]]]
    unnamed = [rule for _, rule in leases if not rule.get("resourceNames")]
    assert [rule["verbs"] for rule in unnamed] == [["create"]]
