"""What production asks of ``manifests/``, checked on what ``kubectl kustomize``
renders: the default install needs no Prometheus Operator CRDs (its objects are an
optional component), the scheduler runs at ``system-cluster-critical``, the Grafana
dashboard is a ConfigMap for Grafana's dashboard sidecar, the profile ConfigMap is
hashed so a changed profile rolls the Deployment, and the metrics port is one number
in the manifests, the code, the image and the docs."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from troupe.kube.health import DEFAULT_PORT

from tests.manifests.manifest_files import (
    MANIFESTS,
    PROMETHEUS_COMPONENT,
    ROOT,
    default_install,
    installed,
    kustomize,
    kustomize_with,
    profile_config_map,
)

PROMETHEUS_KINDS = {"ServiceMonitor", "PrometheusRule"}


def kinds(docs: Any) -> set[str]:
    return {d["kind"] for d in docs}


def deployment(docs: Any) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == "Deployment"]
    return dict(found)


def profile_volume_name(docs: Any) -> str:
    pod = deployment(docs)["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "config"]
    return str(volume["configMap"]["name"])


def test_the_default_install_needs_no_prometheus_operator() -> None:
    docs = default_install()
    assert not kinds(docs) & PROMETHEUS_KINDS
    assert not [d for d in docs if d["apiVersion"].startswith("monitoring.coreos.com/")]
    assert {"Deployment", "Service", "ConfigMap", "ServiceAccount"} <= kinds(docs)


def test_the_prometheus_component_adds_exactly_its_objects() -> None:
    with_component = installed()
    added = [m.doc for m in with_component if m.kind in PROMETHEUS_KINDS]
    assert kinds(added) == PROMETHEUS_KINDS
    rest = [m.doc for m in with_component if m.kind not in PROMETHEUS_KINDS]
    assert rest == list(default_install())


def test_the_component_is_a_kustomize_component() -> None:
    text = (PROMETHEUS_COMPONENT / "kustomization.yaml").read_text()
    assert "kind: Component" in text
    assert kinds(kustomize_with([PROMETHEUS_COMPONENT])) >= PROMETHEUS_KINDS


def test_the_scheduler_runs_at_system_cluster_critical() -> None:
    pod = deployment(default_install())["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"


def test_the_dashboard_is_a_grafana_sidecar_config_map() -> None:
    (cm,) = [
        d
        for d in default_install()
        if d["kind"] == "ConfigMap" and d["metadata"]["labels"].get("grafana_dashboard") == "1"
    ]
    assert cm["metadata"]["name"] == "troupe-grafana-dashboard"  # fixed: replaced in place
    assert cm["metadata"]["namespace"] == "troupe-system"
    (key,) = cm["data"]
    assert key.endswith(".json")
    shipped = json.loads((MANIFESTS / "dashboards" / "troupe.json").read_text())
    assert json.loads(cm["data"][key]) == shipped


def test_the_profile_config_map_is_hashed_and_mounted_by_that_name() -> None:
    name = profile_config_map()["metadata"]["name"]
    assert re.fullmatch(r"troupe-scheduler-config-[a-z0-9]{10}", name)
    assert profile_volume_name(default_install()) == name


def test_a_changed_profile_rolls_the_deployment(tmp_path: Path) -> None:
    copy = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, copy)
    profile = copy / "scheduler-config.yaml"
    profile.write_text(profile.read_text().replace("qps: 300", "qps: 250"))
    before, after = default_install(), kustomize(copy)
    # A new ConfigMap name in the pod template: a new ReplicaSet, a rolling update.
    assert profile_volume_name(after) != profile_volume_name(before)
    template = lambda docs: deployment(docs)["spec"]["template"]  # noqa: E731
    assert template(after) != template(before)


def test_an_unchanged_profile_keeps_the_name() -> None:
    assert profile_volume_name(kustomize(MANIFESTS)) == profile_volume_name(default_install())


# --- one metrics port everywhere ----------------------------------------------------------

# The port a TLS proxy sidecar listens on in front of troupe (docs/operations.md).
PROXY_PORT = 8443


def test_the_manifests_code_and_images_use_one_metrics_port() -> None:
    docs = list(installed())
    container = deployment([m.doc for m in docs])["spec"]["template"]["spec"]["containers"][0]
    (port,) = container["ports"]
    (service,) = [m.doc for m in docs if m.kind == "Service"]
    (service_port,) = service["spec"]["ports"]
    assert port["containerPort"] == service_port["port"] == DEFAULT_PORT == 10259
    assert service_port["targetPort"] == port["name"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.findall(r"^EXPOSE (\d+)", dockerfile, re.M) == [str(DEFAULT_PORT)]
    build_image = (ROOT / "scripts" / "build-image").read_text()
    assert re.findall(r"--port (\d+)", build_image) == [str(DEFAULT_PORT)]


def ports_mentioned(text: str) -> set[int]:
    # host:port, "port N", "on N": every 4-5 digit number next to a port word or colon.
    found = re.findall(r"(?:127\.0\.0\.1:|0\.0\.0\.0:|localhost:|[Pp]ort `?)(\d{4,5})", text)
    return {int(p) for p in found}


def test_the_docs_name_the_same_ports() -> None:
    for page in ("metrics.md", "operations.md"):
        text = (ROOT / "docs" / page).read_text()
        mentioned = ports_mentioned(text)
        assert DEFAULT_PORT in mentioned, page
        assert mentioned <= {DEFAULT_PORT, PROXY_PORT}, (page, mentioned)


def test_the_port_check_would_see_another_port() -> None:
    assert ports_mentioned("forwarding to troupe bound on `127.0.0.1:10251`") == {10251}
    assert ports_mentioned("listening on port 9090") == {9090}
