"""The Deployment, Service, ServiceMonitor and ConfigMap fit together: probes and
scrapes reach the port troupe serves, the profile is where ``--config`` reads it and
loads with troupe's own loader, and the pod runs locked down."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.config import ConfigError, load_config
from troupe.api.quantity import parse_quantity
from troupe.plugins.registry import catalog, default_registry

from tests.manifests.manifest_files import (
    SCHEDULER_NAME,
    one,
    profile_config_map,
    scheduler_config_text,
)

DEPLOYMENT = one("Deployment", "troupe-scheduler")
POD = DEPLOYMENT["spec"]["template"]["spec"]
(CONTAINER,) = POD["containers"]
SERVICE = one("Service", "troupe-scheduler")
SERVE_PORT = 10259  # `troupe run --port` default


def _container_port(ref: int | str) -> int:
    """A probe's or Service's port (number or name) as the container port it reaches."""
    for port in CONTAINER["ports"]:
        if ref in (port["containerPort"], port.get("name")):
            return int(port["containerPort"])
    raise AssertionError(f"port {ref!r} is not a port of the container")


def test_the_container_serves_on_troupes_port() -> None:
    assert [p["containerPort"] for p in CONTAINER["ports"]] == [SERVE_PORT]


@pytest.mark.parametrize(
    ("probe", "path"),
    [("livenessProbe", "/livez"), ("readinessProbe", "/readyz")],
    ids=["liveness asks /livez", "readiness asks /readyz"],
)
def test_probe_asks_troupes_endpoint_on_the_service_port(probe: str, path: str) -> None:
    get = CONTAINER[probe]["httpGet"]
    assert get["path"] == path
    (service_port,) = SERVICE["spec"]["ports"]
    assert _container_port(get["port"]) == _container_port(service_port["targetPort"])
    assert service_port["port"] == SERVE_PORT


def test_the_service_selects_the_deployments_pods() -> None:
    labels = DEPLOYMENT["spec"]["template"]["metadata"]["labels"]
    assert SERVICE["spec"]["selector"].items() <= labels.items()


def test_the_servicemonitor_scrapes_the_service_port() -> None:
    monitor = one("ServiceMonitor")["spec"]
    assert monitor["selector"]["matchLabels"].items() <= SERVICE["metadata"]["labels"].items()
    service_ports = {p["name"] for p in SERVICE["spec"]["ports"]}
    assert [(e["port"], e["path"]) for e in monitor["endpoints"]] == [
        (p, "/metrics") for p in service_ports
    ]


NETWORK_POLICY = one("NetworkPolicy", "troupe-scheduler-metrics")["spec"]


def test_the_network_policy_admits_only_prometheus_to_the_metrics_port() -> None:
    """docs/operations.md, "The metrics port": Prometheus may connect, to that port
    only; the kubelet's probes come from the node, which policies do not block."""
    labels = DEPLOYMENT["spec"]["template"]["metadata"]["labels"]
    assert NETWORK_POLICY["podSelector"]["matchLabels"].items() <= labels.items()
    # Ingress only: egress to the API server stays open.
    assert NETWORK_POLICY["policyTypes"] == ["Ingress"]
    (rule,) = NETWORK_POLICY["ingress"]
    assert [_container_port(p["port"]) for p in rule["ports"]] == [SERVE_PORT]
    (peer,) = rule["from"]
    # Both selectors in one peer: Prometheus pods of that namespace, not all of either.
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
    assert set(peer["namespaceSelector"]["matchLabels"]) == {"kubernetes.io/metadata.name"}


def test_the_probes_and_the_scrapes_use_the_port_the_network_policy_admits() -> None:
    admitted = {_container_port(p["port"]) for r in NETWORK_POLICY["ingress"] for p in r["ports"]}
    probes = {
        _container_port(CONTAINER[p]["httpGet"]["port"])
        for p in ("livenessProbe", "readinessProbe")
    }
    (service_port,) = SERVICE["spec"]["ports"]
    assert probes | {_container_port(service_port["targetPort"])} == admitted


def test_config_flag_reads_the_configmap_key() -> None:
    args = CONTAINER["args"]
    assert CONTAINER["command"] == ["troupe"] and args[0] == "run"
    path = args[args.index("--config") + 1]
    directory, _, key = path.rpartition("/")
    (mount,) = [m for m in CONTAINER["volumeMounts"] if m["mountPath"] == directory]
    (volume,) = [v for v in POD["volumes"] if v["name"] == mount["name"]]
    # The generated ConfigMap, by its hashed name (kustomization.yaml, configMapGenerator).
    assert volume["configMap"]["name"] == profile_config_map()["metadata"]["name"]
    assert key == "config.yaml"  # the ConfigMap's only key (scheduler_config_text)


def test_the_profile_loads_with_troupes_loader() -> None:
    config = load_config(scheduler_config_text(), catalog(default_registry()))
    assert [p.scheduler_name for p in config.profiles] == [SCHEDULER_NAME]
    assert config.leader_election.leader_elect
    assert config.leader_election.resource_namespace == "troupe-system"
    assert config.leader_election.resource_name == "troupe-scheduler"
    # Raised above kube-scheduler's 50/100 (the comment in config.yaml says why).
    assert config.client_connection.qps > 50
    assert config.client_connection.burst >= config.client_connection.qps


def test_the_loader_would_refuse_a_broken_profile() -> None:
    broken = scheduler_config_text().replace("leaderElect: true", "leaderElect: yes-please")
    with pytest.raises(ConfigError, match=r"leaderElection\.leaderElect"):
        load_config(broken, catalog(default_registry()))


def test_two_replicas_with_leader_election_identity_from_the_pod_name() -> None:
    assert DEPLOYMENT["spec"]["replicas"] == 2
    env = {e["name"]: e for e in CONTAINER["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def _get(obj: dict[str, Any], path: str) -> object:
    for part in path.split("."):
        obj = obj.get(part, {})
    return obj


@pytest.mark.parametrize(
    ("where", "path", "expected"),
    [
        ("container", "securityContext.runAsNonRoot", True),
        ("container", "securityContext.readOnlyRootFilesystem", True),
        ("container", "securityContext.allowPrivilegeEscalation", False),
        ("container", "securityContext.capabilities.drop", ["ALL"]),
        ("container", "securityContext.seccompProfile.type", "RuntimeDefault"),
        ("pod", "securityContext.runAsNonRoot", True),
        ("pod", "securityContext.runAsUser", 65532),
        ("pod", "securityContext.seccompProfile.type", "RuntimeDefault"),
    ],
    ids=lambda v: str(v),
)
def test_the_pod_runs_locked_down(where: str, path: str, expected: object) -> None:
    assert _get(CONTAINER if where == "container" else POD, path) == expected


@pytest.mark.parametrize("resource", ["cpu", "memory"])
def test_resources_have_requests_within_limits(resource: str) -> None:
    resources = CONTAINER["resources"]
    request = parse_quantity(str(resources["requests"][resource]))
    limit = parse_quantity(str(resources["limits"][resource]))
    assert 0 < request <= limit


def test_the_pod_can_write_only_tmp() -> None:
    writable = [m["mountPath"] for m in CONTAINER["volumeMounts"] if not m.get("readOnly")]
    assert writable == ["/tmp"]
