"""Simulated kubelets for nodes created with the real kubectl: a node becomes Ready, its
pods run and its graceful deletes finish; a node annotated ``troupe.dev/kubelet: none``
gets no kubelet; ``kubectl delete node`` stops the kubelet. kubectl must be installed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from troupe.sim import SimCluster

from tests.sim.conftest import kubectl

NODE_YAML = """\
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{pool: kubectl}}
{annotations}
"""

POD_YAML = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  nodeName: {node}
  containers: [{{name: c, image: registry.k8s.io/pause:3.10}}]
"""


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    async with SimCluster([]) as sim:
        yield sim


@pytest.fixture
def kubeconfig(cluster: SimCluster, tmp_path: Path) -> Path:
    return cluster.write_kubeconfig(tmp_path / "kubeconfig")


async def ok(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    code, out, err = await kubectl(kubeconfig, *args, stdin=stdin)
    assert code == 0, err
    return out


async def get(kubeconfig: Path, *what: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(await ok(kubeconfig, "get", *what, "-o", "json"))
    return found


async def create_node(kubeconfig: Path, name: str, *, kubelet: bool = True) -> None:
    annotations = "" if kubelet else "  annotations: {troupe.dev/kubelet: none}"
    manifest = NODE_YAML.format(name=name, annotations=annotations)
    assert await ok(kubeconfig, "apply", "-f", "-", stdin=manifest) == f"node/{name} created\n"


async def create_pod(kubeconfig: Path, name: str, node: str) -> None:
    await ok(kubeconfig, "create", "-f", "-", stdin=POD_YAML.format(name=name, node=node))


async def test_a_node_created_with_kubectl_gets_a_kubelet(kubeconfig: Path) -> None:
    await create_node(kubeconfig, "kc-0")
    await ok(kubeconfig, "wait", "--for=condition=Ready", "node/kc-0", "--timeout=20s")
    node = await get(kubeconfig, "node", "kc-0")
    status = node["status"]
    assert status["allocatable"] == status["capacity"]
    assert {a["type"] for a in status["addresses"]} == {"InternalIP", "Hostname"}
    assert status["nodeInfo"]["kubeletVersion"]
    (ready,) = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert ready["reason"] == "KubeletReady" and ready["lastHeartbeatTime"]
    # A pod bound to it runs; kubectl delete waits for the kubelet to finish the delete.
    await create_pod(kubeconfig, "p", "kc-0")
    await ok(kubeconfig, "wait", "--for=jsonpath={.status.phase}=Running", "pod/p", "--timeout=20s")
    running = await get(kubeconfig, "pod", "p")
    assert running["status"]["startTime"]
    assert [list(c["state"]) for c in running["status"]["containerStatuses"]] == [["running"]]
    assert await ok(kubeconfig, "delete", "pod", "p", "--timeout=20s") == 'pod "p" deleted\n'
    code, _, err = await kubectl(kubeconfig, "get", "pod", "p")
    assert (code, "NotFound" in err) == (1, True)


async def test_kubectl_delete_node_stops_its_kubelet(kubeconfig: Path, cluster: SimCluster) -> None:
    await create_node(kubeconfig, "kc-0")
    await ok(kubeconfig, "wait", "--for=condition=Ready", "node/kc-0", "--timeout=20s")
    assert "kc-0" in cluster.kubelets.nodes
    await ok(kubeconfig, "delete", "node", "kc-0")
    assert "kc-0" not in cluster.kubelets.nodes
    # A pod bound to the name now finds no kubelet: it stays Pending, its delete pending.
    await create_pod(kubeconfig, "orphan", "kc-0")
    await asyncio.sleep(0.5)
    assert (await get(kubeconfig, "pod", "orphan"))["status"]["phase"] == "Pending"
    await ok(kubeconfig, "delete", "pod", "orphan", "--wait=false")
    await asyncio.sleep(0.5)
    assert (await get(kubeconfig, "pod", "orphan"))["metadata"]["deletionTimestamp"]


async def test_a_node_annotated_kubelet_none_gets_no_kubelet(kubeconfig: Path) -> None:
    await create_node(kubeconfig, "bare", kubelet=False)
    await create_pod(kubeconfig, "p", "bare")
    await asyncio.sleep(0.5)
    node = await get(kubeconfig, "node", "bare")
    assert not (node.get("status") or {}).get("conditions")
    assert (await get(kubeconfig, "pod", "p"))["status"]["phase"] == "Pending"
    # kubectl gives up waiting: the delete stays Terminating.
    code, _, err = await kubectl(kubeconfig, "delete", "pod", "p", "--timeout=1s")
    assert code == 1 and "timed out" in err
    terminating = await get(kubeconfig, "pod", "p")
    assert terminating["metadata"]["deletionTimestamp"]
    assert terminating["status"]["phase"] == "Pending"
    # Annotated otherwise, the node's kubelet comes up and finishes the delete.
    await ok(kubeconfig, "annotate", "node", "bare", "troupe.dev/kubelet-")
    await ok(kubeconfig, "wait", "--for=delete", "pod/p", "--timeout=20s")
    await ok(kubeconfig, "wait", "--for=condition=Ready", "node/bare", "--timeout=20s")
