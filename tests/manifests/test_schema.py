"""Every manifest parses and carries the fields the API server requires of its kind;
the kustomization lists exactly the installed files; the examples are scheduled by
troupe and name gangs that exist."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.manifests.manifest_files import (
    MANIFESTS,
    NAMESPACE,
    SCHEDULER_NAME,
    Manifest,
    installed,
    load_all,
    yaml_files,
)

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}


def _containers_problems(pod_spec: dict[str, Any]) -> list[str]:
    containers = pod_spec.get("containers") or []
    out = [] if containers else ["spec.containers: at least one container is required"]
    for i, c in enumerate(containers):
        out += [f"containers[{i}].{f}: required" for f in ("name", "image") if not c.get(f)]
    return out


def _template_problems(spec: dict[str, Any]) -> list[str]:
    template = spec.get("template") or {}
    return _containers_problems(template.get("spec") or {})


def _deployment(doc: dict[str, Any]) -> list[str]:
    spec = doc.get("spec", {})
    selector = spec.get("selector", {}).get("matchLabels")
    labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
    out = _template_problems(spec)
    if not selector:
        out.append("spec.selector: required")
    elif any(labels.get(k) != v for k, v in selector.items()):
        out.append("spec.template.metadata.labels: must match spec.selector")
    return out


def _job(doc: dict[str, Any]) -> list[str]:
    pod = doc.get("spec", {}).get("template", {}).get("spec", {})
    out = _template_problems(doc.get("spec", {}))
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        out.append("spec.template.spec.restartPolicy: must be Never or OnFailure")
    return out


def _service(doc: dict[str, Any]) -> list[str]:
    ports = doc.get("spec", {}).get("ports") or []
    out = [] if ports else ["spec.ports: required"]
    out += [f"spec.ports[{i}].port: required" for i, p in enumerate(ports) if "port" not in p]
    if len(ports) > 1:
        out += [f"spec.ports[{i}].name: required" for i, p in enumerate(ports) if not p.get("name")]
    return out


def _rules(doc: dict[str, Any]) -> list[str]:
    out = []
    for i, rule in enumerate(doc.get("rules") or []):
        if not rule.get("verbs"):
            out.append(f"rules[{i}].verbs: required")
        has_resources = "resources" in rule and "apiGroups" in rule
        if has_resources == ("nonResourceURLs" in rule):
            out.append(f"rules[{i}]: needs apiGroups+resources or nonResourceURLs")
        if "nonResourceURLs" in rule and doc["kind"] == "Role":
            out.append(f"rules[{i}].nonResourceURLs: only a ClusterRole may grant them")
    return out or ([] if doc.get("rules") else ["rules: required"])


def _binding(doc: dict[str, Any]) -> list[str]:
    ref = doc.get("roleRef") or {}
    out = [f"roleRef.{f}: required" for f in ("apiGroup", "kind", "name") if not ref.get(f)]
    for i, s in enumerate(doc.get("subjects") or []):
        if s.get("kind") == "ServiceAccount" and not s.get("namespace"):
            out.append(f"subjects[{i}].namespace: required for a ServiceAccount")
    return out


def _configmap(doc: dict[str, Any]) -> list[str]:
    data = doc.get("data") or {}
    return [f"data.{k}: must be a string" for k, v in data.items() if not isinstance(v, str)]


def _pdb(doc: dict[str, Any]) -> list[str]:
    spec = doc.get("spec", {})
    out = [] if spec.get("selector") else ["spec.selector: required"]
    if ("minAvailable" in spec) == ("maxUnavailable" in spec):
        out.append("spec: exactly one of minAvailable and maxUnavailable")
    return out


def _network_policy(doc: dict[str, Any]) -> list[str]:
    spec = doc.get("spec", {})
    out = [] if "podSelector" in spec else ["spec.podSelector: required"]
    types = spec.get("policyTypes") or []
    out += [f"spec.policyTypes: unknown {t!r}" for t in types if t not in ("Ingress", "Egress")]
    for i, rule in enumerate(spec.get("ingress") or []):
        for j, port in enumerate(rule.get("ports") or []):
            if port.get("protocol", "TCP") not in ("TCP", "UDP", "SCTP"):
                out.append(f"spec.ingress[{i}].ports[{j}].protocol: TCP, UDP or SCTP")
    return out


def _service_monitor(doc: dict[str, Any]) -> list[str]:
    spec = doc.get("spec", {})
    out = [] if spec.get("selector") else ["spec.selector: required"]
    endpoints = spec.get("endpoints") or []
    out += [] if endpoints else ["spec.endpoints: required"]
    out += [
        f"spec.endpoints[{i}]: port or targetPort required"
        for i, e in enumerate(endpoints)
        if not (e.get("port") or e.get("targetPort"))
    ]
    return out


def _prometheus_rule(doc: dict[str, Any]) -> list[str]:
    out = []
    for g, group in enumerate(doc.get("spec", {}).get("groups") or []):
        out += [] if group.get("name") else [f"spec.groups[{g}].name: required"]
        for r, rule in enumerate(group.get("rules") or []):
            at = f"spec.groups[{g}].rules[{r}]"
            if ("alert" in rule) == ("record" in rule):
                out.append(f"{at}: exactly one of alert and record")
            if not rule.get("expr"):
                out.append(f"{at}.expr: required")
    return out or ([] if doc.get("spec", {}).get("groups") else ["spec.groups: required"])


def _crd(doc: dict[str, Any]) -> list[str]:
    spec = doc.get("spec", {})
    names = spec.get("names", {})
    out = [f"spec.{f}: required" for f in ("group", "scope", "versions") if not spec.get(f)]
    return out + [f"spec.names.{f}: required" for f in ("plural", "kind") if not names.get(f)]


def _x_podgroup(doc: dict[str, Any]) -> list[str]:
    minimum = doc.get("spec", {}).get("minMember")
    return [] if isinstance(minimum, int) and minimum >= 1 else ["spec.minMember: must be >= 1"]


def _workload(doc: dict[str, Any]) -> list[str]:
    groups = doc.get("spec", {}).get("podGroups") or []
    out = [] if 1 <= len(groups) <= 8 else ["spec.podGroups: 1 to 8 pod groups"]
    for i, g in enumerate(groups):
        if not g.get("name"):
            out.append(f"spec.podGroups[{i}].name: required")
        if len(set(g.get("policy") or {}) & {"basic", "gang"}) != 1:
            out.append(f"spec.podGroups[{i}].policy: exactly one of basic and gang")
    return out


def _nothing(doc: dict[str, Any]) -> list[str]:
    return []


CHECKS: dict[tuple[str, str], Callable[[dict[str, Any]], list[str]]] = {
    ("v1", "Namespace"): _nothing,
    ("v1", "ServiceAccount"): _nothing,
    ("v1", "ConfigMap"): _configmap,
    ("v1", "Service"): _service,
    ("v1", "Pod"): lambda d: _containers_problems(d.get("spec", {})),
    ("apps/v1", "Deployment"): _deployment,
    ("batch/v1", "Job"): _job,
    ("policy/v1", "PodDisruptionBudget"): _pdb,
    ("networking.k8s.io/v1", "NetworkPolicy"): _network_policy,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): _rules,
    ("rbac.authorization.k8s.io/v1", "Role"): _rules,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): _binding,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): _binding,
    ("monitoring.coreos.com/v1", "ServiceMonitor"): _service_monitor,
    ("monitoring.coreos.com/v1", "PrometheusRule"): _prometheus_rule,
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): _crd,
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"): _x_podgroup,
    ("scheduling.k8s.io/v1alpha1", "Workload"): _workload,
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"): _nothing,
    ("kustomize.config.k8s.io/v1alpha1", "Component"): _nothing,
    # The profile: checked by troupe's loader (tests/manifests/test_deployment.py).
    ("kubescheduler.config.k8s.io/v1", "KubeSchedulerConfiguration"): _nothing,
}
# Files that are not API objects, so have no metadata.name.
NOT_OBJECTS = {"Kustomization", "Component", "KubeSchedulerConfiguration"}

ALL = load_all()


def test_every_yaml_file_parses_into_at_least_one_object() -> None:
    for path in yaml_files():
        with path.open(encoding="utf-8") as fh:
            docs = [d for d in yaml.safe_load_all(fh) if d is not None]
        assert docs, f"{path}: no objects"
        assert all(isinstance(d, dict) for d in docs), f"{path}: a document is not a mapping"


@pytest.mark.parametrize("m", ALL, ids=[m.where for m in ALL])
def test_object_has_the_fields_its_kind_requires(m: Manifest) -> None:
    # kustomize's own files and the profile are not API objects and have no name.
    needs_name = m.kind not in NOT_OBJECTS
    problems = ["metadata.name: required"] if needs_name and not m.name else []
    check = CHECKS.get((m.doc.get("apiVersion", ""), m.kind))
    assert check is not None, f"{m.where}: no check for {m.doc.get('apiVersion')} {m.kind}"
    problems += check(m.doc)
    namespace = m.doc.get("metadata", {}).get("namespace")
    if m.kind in CLUSTER_SCOPED and namespace:
        problems.append("metadata.namespace: must not be set on a cluster-scoped kind")
    assert problems == [], m.where


def test_every_installed_namespaced_object_is_in_troupe_system() -> None:
    wrong = [
        m.where
        for m in installed()
        if m.kind not in CLUSTER_SCOPED and m.doc["metadata"].get("namespace") != NAMESPACE
    ]
    assert wrong == []


def _referenced(kustomization: Path) -> set[Path]:
    """The files a kustomization or component uses: resources and generator inputs."""
    doc = yaml.safe_load(kustomization.read_text())
    here = kustomization.parent
    files = {here / r for r in doc.get("resources", [])}
    for generator in doc.get("configMapGenerator", []):
        files |= {here / f.rpartition("=")[2] for f in generator.get("files", [])}
    return files


def test_the_kustomizations_use_exactly_the_files_shipped() -> None:
    # Every file under manifests/ but the examples and kustomize's own is used by the
    # default kustomization or by the Prometheus Operator component, and exists.
    used = _referenced(MANIFESTS / "kustomization.yaml") | _referenced(
        MANIFESTS / "components" / "prometheus" / "kustomization.yaml"
    )
    assert all(p.is_file() for p in used), "a referenced file does not exist"
    shipped = {
        p
        for p in MANIFESTS.rglob("*")
        if p.is_file() and "examples" not in p.parts and p.name != "kustomization.yaml"
    }
    assert used == shipped


def test_the_kustomization_image_is_the_one_the_deployment_runs() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    names = {i["name"] for i in kustomization["images"]}
    deployment = next(m.doc for m in installed() if m.kind == "Deployment")
    images = {
        c["image"].split(":")[0] for c in deployment["spec"]["template"]["spec"]["containers"]
    }
    assert images <= names


EXAMPLES = [m for m in ALL if "examples" in m.path.parts]


def _pod_specs(m: Manifest) -> list[dict[str, Any]]:
    if m.kind == "Pod":
        return [m.doc["spec"]]
    if m.kind in ("Job", "Deployment"):
        return [m.doc["spec"]["template"]["spec"]]
    return []


def _pod_labels(m: Manifest) -> dict[str, str]:
    if m.kind == "Pod":
        return dict(m.doc["metadata"].get("labels") or {})
    if not _pod_specs(m):
        return {}
    return dict(m.doc["spec"]["template"].get("metadata", {}).get("labels") or {})


@pytest.mark.parametrize(
    "m", [m for m in EXAMPLES if _pod_specs(m)], ids=lambda m: f"{m.where} is troupe's"
)
def test_example_pods_ask_for_troupe(m: Manifest) -> None:
    assert all(spec.get("schedulerName") == SCHEDULER_NAME for spec in _pod_specs(m))


def _group_problems(m: Manifest, siblings: list[Manifest]) -> list[str]:
    defined = {(s.kind, s.doc["apiVersion"], s.name): s.doc for s in siblings}
    out = []
    pod_group = _pod_labels(m).get("scheduling.x-k8s.io/pod-group")
    if pod_group and ("PodGroup", "scheduling.x-k8s.io/v1alpha1", pod_group) not in defined:
        out.append(f"label names PodGroup {pod_group!r}, not in the file")
    for spec in _pod_specs(m):
        ref = spec.get("workloadRef")
        if not ref:
            continue
        workload = defined.get(("Workload", "scheduling.k8s.io/v1alpha1", ref["name"]))
        groups = {g["name"] for g in (workload or {}).get("spec", {}).get("podGroups", [])}
        if ref.get("podGroup") not in groups:
            out.append(f"workloadRef {ref} names no pod group of a Workload in the file")
    return out


def test_gang_examples_name_groups_defined_next_to_them() -> None:
    files: dict[Path, list[Manifest]] = {}
    for m in EXAMPLES:
        files.setdefault(m.path, []).append(m)
    gangs = 0
    for siblings in files.values():
        for m in siblings:
            assert _group_problems(m, siblings) == [], m.where
            gangs += bool(_pod_specs(m)) and (
                "scheduling.x-k8s.io/pod-group" in _pod_labels(m)
                or any("workloadRef" in s for s in _pod_specs(m))
            )
    assert gangs == 2, "a gang Job with a PodGroup and a PyTorch-style job with a Workload"


@pytest.mark.parametrize(
    ("labels", "siblings", "expected"),
    [
        pytest.param(
            {"scheduling.x-k8s.io/pod-group": "train"}, [], 1, id="a label naming a missing group"
        ),
        pytest.param(
            {"scheduling.x-k8s.io/pod-group": "train"},
            [
                {
                    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                    "kind": "PodGroup",
                    "metadata": {"name": "train"},
                }
            ],
            0,
            id="a label naming a group in the file",
        ),
    ],
)
def test_the_group_check_can_fail(
    labels: dict[str, str], siblings: list[dict[str, Any]], expected: int
) -> None:
    pod = Manifest(
        MANIFESTS / "x.yaml",
        {"kind": "Pod", "metadata": {"name": "p", "labels": labels}, "spec": {"containers": []}},
    )
    group_files = [Manifest(MANIFESTS / "x.yaml", d) for d in siblings]
    assert len(_group_problems(pod, group_files)) == expected
