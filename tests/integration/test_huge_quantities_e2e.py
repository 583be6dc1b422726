"""Amounts past what troupe holds (10T cores, 10P of anything else), end to end.

A node offering more is reported and left out whole: its taints and labels are never
half-written, so no pod lands on it by mistake; fixed, it is taken in and the pods
waiting for it are scheduled. A bound pod asking more is counted at the limit (its
node is full of that resource) and its deletion frees it. The objects go in and are
patched with the real kubectl where their field order does not matter.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod
from tests.integration.test_malformed_objects import scheduler_errors, warnings
from tests.sim.conftest import kubectl

WIDGETS = "example.com/widgets"


def node(name: str, labels: dict[str, str], taints: list[dict[str, str]], **extra: str) -> str:
    resources = {"cpu": "64", "memory": "256Gi", "pods": "110", **extra}
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "spec": {"taints": taints},
            "status": {"capacity": dict(resources), "allocatable": resources},
        }
    )


def with_requests(body: dict[str, Any], **requests: str) -> dict[str, Any]:
    body["spec"]["containers"][0]["resources"]["requests"].update(requests)
    return body


async def run(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    code, out, err = await kubectl(kubeconfig, *args, stdin=stdin)
    assert (code, err) == (0, ""), err
    return out


def on(bindings: Bindings, names: set[str]) -> Callable[[], bool]:
    return lambda: names <= set(bindings.node)


async def test_a_node_offering_more_than_troupe_holds_is_left_out_whole_until_fixed(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    # A faulty device plugin reports 1e19 widgets: past int64, past what troupe holds.
    # Stored as written (widgets after cpu, memory and pods): a table that wrote the
    # node field by field had its cpu and pods but neither its taint nor its label.
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    gpu = node("gpu-0", {"pool": "gpu"}, [taint], **{WIDGETS: "1e19"})
    cluster.store.create("nodes", json.loads(gpu))
    # Pods that do not tolerate the taint, and one that wants the gpu pool.
    plain = {f"default/plain-{i}" for i in range(12)}
    for i in range(12):
        cluster.store.create("pods", pod(f"plain-{i}", cpu="100m"))
    toleration = {"key": "dedicated", "operator": "Equal", "value": "gpu"}
    picky = pod("picky", cpu="1", nodeSelector={"pool": "gpu"}, tolerations=[toleration])
    cluster.store.create("pods", with_requests(picky, **{WIDGETS: "1"}))

    await eventually(on(bindings, plain), timeout=30, what="the untolerating pods bound")
    assert "gpu-0" not in {bindings.node[k] for k in plain}
    await eventually(
        lambda: bool(warnings(cluster, "Node", "gpu-0", "InvalidNodeResources")),
        timeout=30,
        what="a warning event on gpu-0",
    )
    [note] = warnings(cluster, "Node", "gpu-0", "InvalidNodeResources")
    assert note == (
        f"node gpu-0: status.allocatable[{WIDGETS}]: invalid quantity '1e19': more than "
        "troupe can hold (at most 10P); the node is left out of scheduling until it is "
        "corrected"
    )
    assert "default/picky" not in bindings.node

    # The device plugin is fixed: the node is taken in, whole, and the pod waiting
    # for it binds there; pods without the toleration still keep off it.
    fixed = {"status": {"allocatable": {WIDGETS: "8"}, "capacity": {WIDGETS: "8"}}}
    await run(
        kubeconfig,
        *("patch", "node", "gpu-0", "--subresource=status", "--type=merge"),
        *("-p", json.dumps(fixed)),
    )
    await eventually(
        lambda: bindings.node.get("default/picky") == "gpu-0",
        timeout=30,
        what="the pod that waited for gpu-0 bound there",
    )
    later = {f"default/later-{i}" for i in range(12)}
    for i in range(12):
        cluster.store.create("pods", pod(f"later-{i}", cpu="100m"))
    await eventually(on(bindings, later), timeout=30, what="later pods bound")
    assert "gpu-0" not in {bindings.node[k] for k in later}
    assert len(warnings(cluster, "Node", "gpu-0", "InvalidNodeResources")) == 1
    assert scheduler_errors(cluster) == []


async def test_a_bound_pod_asking_more_than_troupe_holds_fills_its_node_until_deleted(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    bindings = Bindings(cluster)
    await run(kubeconfig, "create", "-f", "-", stdin=node("w-0", {}, [], **{WIDGETS: "4"}))
    # Bound by someone else (spec.nodeName set): 1e19 widgets, 1e18 cores.
    hog = pod("hog", cpu="1e18", nodeName="w-0")
    await run(
        kubeconfig, "create", "-f", "-", stdin=json.dumps(with_requests(hog, **{WIDGETS: "1e19"}))
    )
    await eventually(
        lambda: bool(warnings(cluster, "Pod", "hog", "InvalidQuantity")),
        timeout=30,
        what="a warning event on the pod",
    )
    [note] = warnings(cluster, "Pod", "hog", "InvalidQuantity")
    assert note.startswith("pod default/hog: spec.containers[0].resources.requests[")
    assert note.endswith("on node w-0")
    # w-0 is full of widgets and cpu for troupe: a widget pod waits, and plain pods
    # go to the other nodes although w-0 has the most cpu.
    wants_widget = with_requests(pod("widget", cpu="100m"), **{WIDGETS: "1"})
    cluster.store.create("pods", wants_widget)
    plain = {f"default/plain-{i}" for i in range(6)}
    for i in range(6):
        cluster.store.create("pods", pod(f"plain-{i}", cpu="100m"))
    await eventually(on(bindings, plain), timeout=30, what="plain pods bound")
    assert "w-0" not in {bindings.node[k] for k in plain}
    await eventually(
        lambda: any(
            "Insufficient example.com/widgets" in n
            for n in warnings(cluster, "Pod", "widget", "FailedScheduling")
        ),
        timeout=30,
        what="the widget pod told there are not enough widgets",
    )
    assert "default/widget" not in bindings.node

    code, _, _ = await kubectl(kubeconfig, "delete", "pod", "hog", "--grace-period=0", "--force")
    assert code == 0
    await eventually(
        lambda: bindings.node.get("default/widget") == "w-0",
        timeout=30,
        what="the widget pod bound once the hog is gone",
    )
    assert scheduler_errors(cluster) == []
