"""``troupe snapshot`` of a running embedded cluster (a subprocess, as a user runs it)
and ``troupe replay`` of the file (in process): the gang that does not fit stays
pending with its reason, binds once ``--add-nodes`` gives it room, and ``--compare``
prints both configurations' outcomes."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from troupe.cli import main as troupe
from troupe.scheduler.service import logs
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec
from troupe.sim.snapshot_file import read_snapshot

from tests.integration.conftest import pod
from tests.integration.report_page import Report


@pytest.fixture(autouse=True)
def process_logging_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``troupe replay`` runs in this process here and configures logging as the
    command does, but without caching loggers on first use (a cached module logger
    would keep this configuration after the test and hide later tests' log lines from
    ``structlog.testing.capture_logs``); everything is put back afterwards."""
    original = logs.configure_logging

    def configure(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        structlog.configure(cache_logger_on_first_use=False)

    monkeypatch.setattr("troupe.cli.replay.configure_logging", configure)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)


NODE_TEMPLATE = """\
apiVersion: v1
kind: Node
metadata:
  name: big
  labels: {kubernetes.io/hostname: big}
status:
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
"""

MOST_ALLOCATED = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: troupe-scheduler
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy: {type: MostAllocated}
"""

NEW_GANG = """\
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train, namespace: ml}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
"""


def member(name: str, gang: str, cpu: str) -> dict[str, Any]:
    return pod(name, cpu=cpu, metadata={"labels": {"scheduling.x-k8s.io/pod-group": gang}})


async def _snapshot(out: Path) -> None:
    """Two 4-cpu nodes: three 1-cpu pods and a bound 2-cpu pod fit, the gang of three
    3-cpu pods does not."""
    async with SimCluster([NodeSpec(count=2, cpu="4", memory="8Gi")]) as cluster:
        store = cluster.store
        for i in range(3):
            store.create("pods", pod(f"web-{i}", cpu="1"))
        bound = pod("db-0", cpu="2")
        bound["spec"]["nodeName"] = "node-0"
        store.create("pods", bound)
        store.create(
            "podgroups.scheduling.x-k8s.io",
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "big", "namespace": "default"},
                "spec": {"minMember": 3},
            },
        )
        for i in range(3):
            store.create("pods", member(f"big-{i}", "big", "3"))
        # The embedded API server serves no Secrets; a ConfigMap stands for both.
        store.create(
            "configmaps",
            {"metadata": {"name": "settings", "namespace": "default"}, "data": {"k": "v"}},
        )
        kubeconfig = cluster.write_kubeconfig(out.parent / "kubeconfig")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "troupe",
            "snapshot",
            "--kubeconfig",
            str(kubeconfig),
            "-o",
            str(out),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ},
        )
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        assert f"wrote {out}" in err.decode()


@pytest.fixture(scope="module")
def snapshot_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("snapshot") / "cluster.yaml"
    asyncio.run(_snapshot(out))
    return out


@pytest.fixture
def node_yaml(tmp_path: Path) -> Path:
    path = tmp_path / "node.yaml"
    path.write_text(NODE_TEMPLATE)
    return path


def replay(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = troupe(["replay", *args, "--timeout", "30"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_snapshot_has_nodes_pods_and_gangs_and_no_configmaps(snapshot_file: Path) -> None:
    doc = yaml.safe_load(snapshot_file.read_text())
    assert doc["kind"] == "TroupeSnapshot"
    assert doc["apiVersion"] == "troupe.dev/v1alpha1"
    assert doc["takenAt"] and doc["serverVersion"]
    resources = doc["resources"]
    assert [n["metadata"]["name"] for n in resources["nodes"]] == ["node-0", "node-1"]
    assert resources["nodes"][0]["status"]["allocatable"]["cpu"] == "4"
    pods = {p["metadata"]["name"]: p for p in resources["pods"]}
    assert set(pods) == {"web-0", "web-1", "web-2", "db-0", "big-0", "big-1", "big-2"}
    assert pods["db-0"]["spec"]["nodeName"] == "node-0"
    assert [g["metadata"]["name"] for g in resources["coschedulingpodgroups"]] == ["big"]
    assert "default" in {n["metadata"]["name"] for n in resources["namespaces"]}
    assert resources["priorityclasses"]  # the system ones
    text = snapshot_file.read_text()
    assert "ConfigMap" not in text and "Secret" not in text and "settings" not in text
    assert "managedFields" not in text
    assert read_snapshot(snapshot_file).objects("pods")


def test_replay_leaves_the_gang_that_does_not_fit_pending(
    snapshot_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = replay(capsys, str(snapshot_file))
    assert "Profile default: 3 of 6 pods placed on 2 nodes" in out, out
    pending = out.split("Pending:", 1)[1].split("Gangs:", 1)[0]
    for i in range(3):
        assert f"big-{i}" in pending
    assert re.search(r"gang default/big: [0-2] of 3 required pods fit; .*Insufficient cpu", pending)
    gangs = out.split("Gangs:", 1)[1].split("Utilisation:", 1)[0]
    assert "big   scheduling.x-k8s.io/v1alpha1  3         0      pending" in gangs, out
    assert "largest free" in out


def test_replay_json_shape(snapshot_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(replay(capsys, str(snapshot_file), "-o", "json"))
    assert set(doc) >= {"pods", "gangs", "pending", "utilisation"}
    pods = {p["name"]: p for p in doc["pods"]}
    assert set(pods) == {"web-0", "web-1", "web-2", "big-0", "big-1", "big-2"}
    assert all(set(p) == {"namespace", "name", "node"} for p in doc["pods"])
    assert all(pods[f"big-{i}"]["node"] == "" for i in range(3))
    assert all(pods[f"web-{i}"]["node"] in ("node-0", "node-1") for i in range(3))
    assert doc["gangs"] == [
        {
            "namespace": "default",
            "name": "big",
            "api": "scheduling.x-k8s.io/v1alpha1",
            "minCount": 3,
            "bound": 0,
        }
    ]
    assert {p["name"] for p in doc["pending"]} == {"big-0", "big-1", "big-2"}
    assert all("Insufficient cpu" in p["reason"] for p in doc["pending"])
    # db-0 (2) and the three web pods (1 each) on 8 cpus.
    assert doc["utilisation"]["cpu"] == {"requested": "5", "allocatable": "8", "percent": 62.5}
    assert doc["utilisation"]["pods"]["requested"] == "4"


def test_replay_with_added_nodes_binds_the_gang(
    snapshot_file: Path, node_yaml: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    manifest = tmp_path / "gang.yaml"
    members = [
        {
            **pod(f"train-{i}", cpu="9"),
            "metadata": {"name": f"train-{i}", "namespace": "ml"},
        }
        for i in range(2)
    ]
    for m in members:
        m["spec"]["schedulingGroup"] = {"podGroupName": "train"}
    manifest.write_text(NEW_GANG + "---\n" + yaml.safe_dump_all(members))
    args = [str(snapshot_file), "--add-nodes", "2", "--node-template", str(node_yaml)]
    doc = json.loads(replay(capsys, *args, "--add", str(manifest), "-o", "json"))
    nodes = {p["name"]: p["node"] for p in doc["pods"]}
    assert all(nodes[f"big-{i}"] for i in range(3)), doc
    gangs = {g["name"]: g for g in doc["gangs"]}
    assert gangs["big"]["bound"] == 3
    # The added gang wants 9 cpus a member, more than any node has: it waits.
    assert gangs["train"] == {
        "namespace": "ml",
        "name": "train",
        "api": "scheduling.k8s.io/v1beta1",
        "minCount": 2,
        "bound": 0,
    }
    assert {p["name"] for p in doc["pending"]} == {"train-0", "train-1"}
    assert all("gang ml/train" in p["reason"] for p in doc["pending"]), doc["pending"]
    assert doc["utilisation"]["cpu"]["allocatable"] == "24"


def test_replay_remove_nodes_unbinds_their_pods(
    snapshot_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [str(snapshot_file), "--remove-nodes", "kubernetes.io/hostname=node-0", "-o", "json"]
    doc = json.loads(replay(capsys, *args))
    nodes = {p["name"]: p["node"] for p in doc["pods"]}
    # db-0 was bound to node-0: pending again, and scheduled onto the one node left.
    assert nodes["db-0"] == "node-1"
    assert doc["utilisation"]["cpu"]["allocatable"] == "4"


def test_replay_compare_prints_both_profiles(
    snapshot_file: Path, node_yaml: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    most = tmp_path / "most-allocated.yaml"
    most.write_text(MOST_ALLOCATED)
    args = [str(snapshot_file), "--add-nodes", "2", "--node-template", str(node_yaml)]
    out = replay(capsys, *args, "--compare", "default", str(most))
    assert "Compare default vs most-allocated:" in out, out
    lines = out.splitlines()
    assert any(line.split() == ["pods", "placed", "6/6", "6/6"] for line in lines), out
    assert any(line.split() == ["gangs", "bound", "1/1", "1/1"] for line in lines), out
    assert any(line.startswith("cpu largest free") for line in lines), out
    pods = out.split("Pods:", 1)[1].split("Gangs", 1)[0]
    assert pods.splitlines()[1].split() == ["namespace", "pod", "default", "most-allocated"]
    doc = json.loads(replay(capsys, *args, "--compare", "default", str(most), "-o", "json"))
    assert [run["profile"] for run in doc["compare"]] == ["default", "most-allocated"]
    # MostAllocated packs: a whole 8-cpu node stays free; LeastAllocated spreads.
    assert doc["compare"][1]["fragmentation"]["cpu"] == "8"
    assert doc["compare"][0]["fragmentation"]["cpu"] != "8"


def test_replay_report_matches_the_run(
    snapshot_file: Path, node_yaml: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The gang binds on two added nodes; the page's data is the run's ``-o json``."""
    page = tmp_path / "report.html"
    args = [str(snapshot_file), "--add-nodes", "2", "--node-template", str(node_yaml)]
    doc = json.loads(replay(capsys, *args, "-o", "json", "--report", str(page)))
    report = Report(page)
    report.assert_self_contained()
    assert report.figures() == ["troupe-heatmap-0", "troupe-timeline-0"]
    assert report.data["source"] == "replay"
    [run] = report.data["runs"]
    assert run["label"] == "default"
    assert run["pods"] == len(doc["pods"]) == 6
    assert run["bound"] == sum(1 for p in doc["pods"] if p["node"]) == 6
    assert run["pendingPods"] == [
        {"pod": f"{p['namespace']}/{p['name']}", "reason": p["reason"]} for p in doc["pending"]
    ]
    [gang] = run["gangs"]
    assert (gang["name"], gang["minMember"], gang["bound"]) == ("big", 3, 3)
    assert gang["outcome"] == "scheduled" and gang["boundBefore"] == 0
    # Replay times: every pod there at the start, bound by the replay's scheduler.
    assert gang["submitted"] == 0.0 and gang["finished"] is None
    assert 0 < gang["firstBound"] <= gang["lastBound"] <= run["seconds"]
    assert "no submission times" in run["timesNote"]
    # The heatmap's numbers add up to the utilisation table.
    nodes = {n["name"]: n["resources"] for n in run["nodes"]}
    assert set(nodes) == {"node-0", "node-1", "big-replay-0", "big-replay-1"}
    cpu = doc["utilisation"]["cpu"]
    assert sum(r["cpu"]["requested"] for r in nodes.values()) == float(cpu["requested"])
    assert sum(r["cpu"]["allocatable"] for r in nodes.values()) == float(cpu["allocatable"])
    assert sum(r["pods"]["requested"] for r in nodes.values()) == int(
        doc["utilisation"]["pods"]["requested"]
    )
    # db-0 was bound in the snapshot and stays on node-0.
    assert nodes["node-0"]["cpu"]["requested"] >= 2.0


def test_replay_report_of_a_pending_gang_and_of_a_compare(
    snapshot_file: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    most = tmp_path / "most-allocated.yaml"
    most.write_text(MOST_ALLOCATED)
    replay(capsys, str(snapshot_file), "--compare", "default", str(most), "--report", str(page))
    report = Report(page)
    report.assert_self_contained()
    assert report.figures() == [
        "troupe-heatmap-0",
        "troupe-timeline-0",
        "troupe-heatmap-1",
        "troupe-timeline-1",
    ]
    assert [r["label"] for r in report.data["runs"]] == ["default", "most-allocated"]
    for run in report.data["runs"]:
        [gang] = run["gangs"]
        assert (gang["name"], gang["bound"], gang["outcome"]) == ("big", 0, "pending")
        assert gang["firstBound"] is None
        assert {p["pod"] for p in run["pendingPods"]} == {f"default/big-{i}" for i in range(3)}
        assert all("Insufficient cpu" in p["reason"] for p in run["pendingPods"])
        cpu = [n["resources"]["cpu"] for n in run["nodes"]]
        assert sum(c["requested"] for c in cpu) == 5.0  # db-0 and the three web pods
