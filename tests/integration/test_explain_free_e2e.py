"""``troupe explain``'s free-capacity fix end to end: the pods it names are deleted from
the embedded cluster and the target binds. A Kubernetes 1.37 gang (a v1beta1 PodGroup
with a required rack) explained by ``troupe run`` and ``--offline``; a lone pod whose
only free node has a taint it does not tolerate; a pod whose room is made without
moving the pod a PodDisruptionBudget protects."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from troupe.kube.debug import fetch_explanation
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import RACK_LABEL, NodeSpec

from tests.integration.conftest import Bindings, eventually
from tests.integration.test_explain_e2e import TOKEN, shape, start_run, stop_run, troupe

PRIORITIES = {"low": 10, "train": 100, "high": 1000}


def priority_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": PRIORITIES[name],
        "preemptionPolicy": "Never" if name == "train" else "PreemptLowerPriority",
    }


def running(
    name: str, node: str | None, cls: str | None, cpu: str = "1", gpus: int = 0, **spec: Any
) -> dict[str, Any]:
    """A pod as the API server stores it after admission (priority resolved), bound to
    ``node`` when one is given."""
    resources: dict[str, Any] = {"requests": {"cpu": cpu}}
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    body: dict[str, Any] = {
        "schedulerName": "troupe-scheduler",
        "containers": [{"name": "c", "image": "pause", "resources": resources}],
        "priority": PRIORITIES[cls] if cls else 0,
        **spec,
    }
    if cls:
        body["priorityClassName"] = cls
        body["preemptionPolicy"] = priority_class(cls)["preemptionPolicy"]
    if node:
        body["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": body,
    }


async def explain(kubeconfig: Path, *args: str) -> tuple[dict[str, Any], str]:
    """The JSON report and the text of one target, the same way."""
    base = ("explain", *args, "--kubeconfig", str(kubeconfig))
    code, out, err = await troupe(*base, "-o", "json")
    assert code == 0, err
    code, text, err = await troupe(*base)
    assert code == 0, err
    print(text)
    return json.loads(out), text


async def binds_after_moving(
    cluster: SimCluster, kubeconfig: Path, tmp_path: Path, moved: str, target: str, node: str
) -> None:
    """Delete the pod the fix named (``moved``), start ``troupe run`` and wait for
    ``target`` to bind on ``node``: the fix, carried out, places the pod."""
    bindings = Bindings(cluster)
    cluster.store.delete("pods", moved, "default", grace_period_seconds=0)
    (tmp_path / "token").write_text(TOKEN)
    proc, _ = await start_run(kubeconfig, "--debug-token-file", str(tmp_path / "token"))
    try:
        await eventually(
            lambda: bindings.node.get(target) == node,
            timeout=30,
            what=f"the pod bound on {node}",
        )
    finally:
        await stop_run(proc)


async def test_free_a_rack_for_a_v1beta1_gang_then_move_the_named_pods(tmp_path: Path) -> None:
    # 4 nodes of 4 GPUs in 2 racks: node-0 and node-2 in zone-a-r0, node-1 and node-3
    # in zone-a-r1, all full. r0 holds four pods of 2 GPUs of low priority; r1 one
    # low-priority pod of 4 GPUs and one of high priority (above the gang's).
    cluster = SimCluster(
        [NodeSpec(count=4, cpu="16", memory="64Gi", gpus=4, zones=("zone-a",), racks=2)],
        bookmark_interval=0.5,
    )
    async with cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN)
        racks = {
            n["metadata"]["name"]: n["metadata"]["labels"][RACK_LABEL]
            for n in cluster.store.list("nodes")
        }
        assert racks == {
            "node-0": "zone-a-r0",
            "node-1": "zone-a-r1",
            "node-2": "zone-a-r0",
            "node-3": "zone-a-r1",
        }
        for cls in PRIORITIES:
            cluster.store.create("priorityclasses.scheduling.k8s.io", priority_class(cls))
        for node in ("node-0", "node-2"):
            for i in range(2):
                cluster.store.create("pods", running(f"low-{node}-{i}", node, "low", gpus=2))
        cluster.store.create("pods", running("low-node-1", "node-1", "low", gpus=4))
        cluster.store.create("pods", running("high-node-3", "node-3", "high", gpus=4))
        # The gang: 2 members of 4 GPUs in one rack; its priority class never preempts.
        cluster.store.create(
            "podgroups.scheduling.k8s.io",
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "train", "namespace": "default"},
                "spec": {
                    "schedulingPolicy": {"gang": {"minCount": 2}},
                    "schedulingConstraints": {"topology": [{"key": RACK_LABEL}]},
                },
            },
        )
        for i in range(2):
            member = running(
                f"train-{i}", None, "train", gpus=4, schedulingGroup={"podGroupName": "train"}
            )
            cluster.store.create("pods", member)
        bindings = Bindings(cluster)
        proc, server = await start_run(kubeconfig, "--debug-token-file", str(token_file))
        try:
            for _ in range(300):
                if await fetch_explanation(server, TOKEN, "podgroup", "default", "train"):
                    break
                await asyncio.sleep(0.05)
            live = (
                "podgroup",
                "default/train",
                "--server",
                server,
                "--token-file",
                str(token_file),
            )
            report, text = await explain(kubeconfig, *live)
            offline, offline_text = await explain(
                kubeconfig, "podgroup", "default/train", "--offline"
            )

            d = report["diagnosis"]
            assert report["source"] == "scheduler"
            assert d["group"]["kind"] == "PodGroup"
            assert d["group"]["api"].startswith("scheduling.k8s.io/")
            assert d["quorum"]["minCount"] == 2 and d["quorum"]["fit"] == 0
            assert d["quorum"]["minCountField"] == "spec.schedulingPolicy.gang.minCount"
            assert d["topology"]["required"] == RACK_LABEL
            assert d["preemption"]["result"] == "never"
            assert shape(offline["diagnosis"]) == shape(d)
            assert "minCount 2 (spec.schedulingPolicy.gang.minCount)" in text
            assert f"{RACK_LABEL}=zone-a-r0: 0 of 2 fit; short 8 nvidia.com/gpu" in text

            # The fix frees r0 (four pods, all of lower priority) rather than r1 (two
            # pods, but one above the gang's priority), and says why preemption did not.
            for r in (report, offline):
                free = [f for f in r["fixes"] if f["kind"] == "freeCapacity"]
                assert len(free) == 1, r["fixes"]
                fix = free[0]
                assert fix["verified"] and fix["checkSeconds"] > 0
                assert fix["domain"] == f"{RACK_LABEL}=zone-a-r0"
                assert fix["nodes"] == ["node-0", "node-2"]
                assert fix["freed"] == {"cpu": 4000, "nvidia.com/gpu": 8}
                assert fix["lowerPriority"] is True
                assert sorted(fix["pods"]) == [
                    "default/low-node-0-0",
                    "default/low-node-0-1",
                    "default/low-node-2-0",
                    "default/low-node-2-1",
                ]
                assert {racks[n] for n in fix["placement"].values()} == {"zone-a-r0"}
            line = (
                "free 4 cpu, 8 nvidia.com/gpu in rack zone-a-r0 (move 4 pods: "
                "default/low-node-0-0, default/low-node-0-1, default/low-node-2-0, "
                "default/low-node-2-1)"
            )
            for t in (text, offline_text):
                assert line in t
                assert "all of lower priority than the target (100)" in t
                assert "preemptionPolicy: Never" in t

            # Move exactly the named pods: the gang binds in that rack.
            (fix,) = [f for f in report["fixes"] if f["kind"] == "freeCapacity"]
            for key in fix["pods"]:
                cluster.store.delete("pods", key.split("/")[1], "default", grace_period_seconds=0)
            await eventually(
                lambda: {"default/train-0", "default/train-1"} <= set(bindings.node),
                timeout=30,
                what="the gang bound",
            )
            assert {racks[bindings.node[f"default/train-{i}"]] for i in range(2)} == {"zone-a-r0"}
            assert cluster.store.get("pods", "high-node-3", "default")["spec"]["nodeName"]
        finally:
            await stop_run(proc)


async def test_free_a_node_for_a_pod_not_on_the_tainted_one(tmp_path: Path) -> None:
    # node-0: 1 cpu free; node-1: none; tainted-0: empty but tainted. The pod (3 cpu,
    # priority 0) does not tolerate the taint; every running pod has a higher priority.
    taint = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
    cluster = SimCluster(
        [
            NodeSpec(count=2, cpu="4", memory="16Gi", racks=0),
            NodeSpec(count=1, cpu="4", memory="16Gi", racks=0, name_prefix="tainted",
                     taints=(taint,)),
        ],
        bookmark_interval=0.5,
    )  # fmt: skip
    async with cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        cluster.store.create("priorityclasses.scheduling.k8s.io", priority_class("high"))
        for name, node, cpu in (("a", "node-0", "1"), ("b", "node-0", "2"),
                                ("c", "node-1", "2"), ("d", "node-1", "2")):  # fmt: skip
            cluster.store.create("pods", running(name, node, "high", cpu=cpu))
        cluster.store.create("pods", running("solo", None, None, cpu="3"))
        report, text = await explain(kubeconfig, "pod", "default/solo", "--offline")

        rows = {r["node"]: r for r in report["capacity"]["nodes"]}
        assert rows["tainted-0"]["fit"] == 0
        assert rows["tainted-0"]["note"] == "taint dedicated=db:NoSchedule not tolerated"
        assert rows["node-0"]["short"] == {"cpu": 2000}
        assert re.search(r"tainted-0\s+4 cpu\s+0\s+-\s+excluded: taint dedicated=db", text)
        assert "cluster: 0 of 1 fit; short 2 cpu (1 of 3 nodes excluded by filters)" in text

        free = [f for f in report["fixes"] if f["kind"] == "freeCapacity"]
        assert len(free) == 1, report["fixes"]
        fix = free[0]
        assert fix["pods"] == ["default/b"] and fix["nodes"] == ["node-0"]
        assert fix["domain"] == "" and fix["lowerPriority"] is False
        assert fix["placement"] == {"default/solo": "node-0"}
        assert "free 2 cpu on node-0 (move 1 pod: default/b)" in text
        assert "1 of the moved pods have priority >= the target's (0)" in text
        # The node to clone is one the pod may use, not the empty tainted one.
        assert "like tainted-0" not in text

        await binds_after_moving(cluster, kubeconfig, tmp_path, "b", "default/solo", "node-0")


async def test_free_room_without_pods_a_budget_protects(tmp_path: Path) -> None:
    # node-0 and node-1 each hold one pod of 3 cpu; the one on node-0 is protected by a
    # PodDisruptionBudget (minAvailable 1 of 1: no disruption allowed). Moving either
    # would make room for the pod of 3 cpu; the fix moves the unprotected one.
    cluster = SimCluster(
        [NodeSpec(count=2, cpu="4", memory="16Gi", racks=0)], bookmark_interval=0.5
    )
    async with cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        cluster.store.create("priorityclasses.scheduling.k8s.io", priority_class("low"))
        db = running("db-0", "node-0", "low", cpu="3")
        db["metadata"]["labels"] = {"app": "db"}
        cluster.store.create("pods", db)
        cluster.store.create("pods", running("web-0", "node-1", "low", cpu="3"))
        cluster.store.create(
            "poddisruptionbudgets.policy",
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "db", "namespace": "default"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
            },
        )
        cluster.store.create("pods", running("solo", None, None, cpu="3"))
        report, text = await explain(kubeconfig, "pod", "default/solo", "--offline")

        free = [f for f in report["fixes"] if f["kind"] == "freeCapacity"]
        assert len(free) == 1, report["fixes"]
        assert free[0]["pods"] == ["default/web-0"] and free[0]["overBudget"] == {}
        assert "free 3 cpu on node-1 (move 1 pod: default/web-0)" in text

        await binds_after_moving(cluster, kubeconfig, tmp_path, "web-0", "default/solo", "node-1")
