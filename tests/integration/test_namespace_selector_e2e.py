"""Pod anti-affinity selecting namespaces by label, end to end: namespaces labelled
and relabelled with kubectl against the embedded API server, troupe's Namespace
informer, InterPodAffinity, and the queueing hint that retries a waiting pod when
a namespace's labels change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import eventually, pod
from tests.sim.conftest import kubectl

HOSTNAME = "kubernetes.io/hostname"
NAMESPACE_YAML = """\
apiVersion: v1
kind: Namespace
metadata:
  name: {name}
  labels: {{team: {team}}}
"""


def web(namespace: str, node: str) -> dict[str, Any]:
    """A running web pod, bound to ``node`` by its creator."""
    return pod(
        "web",
        scheduler="default-scheduler",
        metadata={"namespace": namespace, "labels": {"app": "web"}},
        nodeName=node,
    )


def away_from_team_a_web(name: str, **spec: Any) -> dict[str, Any]:
    """A pod that may not share a node with a web pod of any namespace labelled team=a."""
    term = {
        "topologyKey": HOSTNAME,
        "labelSelector": {"matchLabels": {"app": "web"}},
        "namespaceSelector": {"matchLabels": {"team": "a"}},
    }
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return pod(name, cpu="100m", affinity=affinity, **spec)


def spec_of(cluster: SimCluster, name: str) -> dict[str, Any]:
    return dict(cluster.store.get("pods", name, "default")["spec"])


def scheduled_condition(cluster: SimCluster, name: str) -> dict[str, Any] | None:
    for c in cluster.store.get("pods", name, "default")["status"].get("conditions", []):
        if c["type"] == "PodScheduled":
            return dict(c)
    return None


async def test_anti_affinity_by_namespace_label_is_enforced_and_follows_a_relabel(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    for name, team in (("shop", "a"), ("blog", "a"), ("lab", "b")):
        code, _, err = await kubectl(
            kubeconfig, "apply", "-f", "-", stdin=NAMESPACE_YAML.format(name=name, team=team)
        )
        assert (code, err) == (0, "")
    n0, n1, n2 = cluster.node_names
    # Web pods on every node; only those of shop and blog (team=a) keep the pod away.
    for namespace, node in (("shop", n0), ("blog", n1), ("lab", n2)):
        cluster.store.create("pods", web(namespace, node))
    scheduler = daemon.wired
    assert scheduler is not None
    namespaces = scheduler.profiles["troupe-scheduler"].namespaces
    await eventually(
        lambda: (
            all(f"{ns}/web" in scheduler.cache for ns in ("shop", "blog", "lab"))
            and namespaces.labels_of("lab") is not None
        ),
        what="the informers",
    )

    cluster.store.create("pods", away_from_team_a_web("guard"))
    await eventually(lambda: bool(spec_of(cluster, "guard").get("nodeName")), what="guard bound")
    assert spec_of(cluster, "guard")["nodeName"] == n2

    # Held to shop's node, the second guard waits: shop is team=a.
    cluster.store.create("pods", away_from_team_a_web("pinned", nodeSelector={HOSTNAME: n0}))
    await eventually(
        lambda: scheduled_condition(cluster, "pinned") is not None, what="pinned rejected"
    )
    condition = scheduled_condition(cluster, "pinned")
    assert condition is not None and condition["status"] == "False"
    assert "1 node(s) didn't match pod anti-affinity rules" in condition["message"]
    assert not spec_of(cluster, "pinned").get("nodeName")

    # Relabelling shop takes its web pod out of the selector: the waiting pod is
    # retried on the namespace event (no five-minute flush) and fits.
    code, out, err = await kubectl(
        kubeconfig, "label", "namespace", "shop", "team=x", "--overwrite"
    )
    assert (code, out, err) == (0, "namespace/shop labeled\n", "")
    await eventually(
        lambda: spec_of(cluster, "pinned").get("nodeName") == n0, timeout=15, what="pinned bound"
    )
