"""``troupe explain`` end to end: a gang that does not fit in the embedded cluster, the
diagnosis of ``troupe run``'s last attempt read through ``/debug/troupe/explain`` with
the debug token, the same diagnosis recomputed ``--offline``, and a suggested fix that
is real (applied to the cluster, the gang binds)."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from troupe.kube.debug import DebugEndpointError, fetch_explanation
from troupe.sim.apiserver.auth.authenticator import TokenUsers
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec

from tests.integration.conftest import Bindings, eventually, pod
from tests.integration.test_composite_gangs_e2e import COMPOSITES, child, composite
from tests.integration.test_v1beta1_gangs_e2e import member

TOKEN = "s3cret-debug-token-0123456789"


def gang(n: int, cpu: str = "3") -> list[dict[str, Any]]:
    return [
        pod(
            f"train-{i}",
            cpu=cpu,
            metadata={"labels": {"scheduling.x-k8s.io/pod-group": "train"}},
        )
        for i in range(n)
    ]


def coscheduling(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member},
    }


async def troupe(*args: str, timeout: float = 90) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "troupe",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def start_run(kubeconfig: Path, *auth: str) -> tuple[asyncio.subprocess.Process, str]:
    """``troupe run`` with the debug endpoint on (``auth``: its flags); returns it and
    its metrics URL."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "troupe",
        "run",
        "--kubeconfig",
        str(kubeconfig),
        "--leader-elect=false",
        "--bind-address",
        "127.0.0.1",
        "--port",
        "0",
        *auth,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    while True:
        line = await asyncio.wait_for(proc.stderr.readline(), 30)
        assert line, "troupe run exited"
        entry = json.loads(line)
        if entry["msg"].startswith("serving /metrics"):
            assert "/debug/troupe/explain" in entry["msg"]
            return proc, f"http://127.0.0.1:{entry['port']}"


async def stop_run(proc: asyncio.subprocess.Process) -> None:
    proc.terminate()
    await asyncio.wait_for(proc.communicate(), 30)


def shape(diagnosis: dict[str, Any]) -> dict[str, Any]:
    """What two attempts at the same state agree on (not when, nor on which node)."""
    return {
        "quorum": diagnosis["quorum"],
        "why": diagnosis["why"],
        "members": sorted(
            (m["pod"], m["reason"], json.dumps(m["rejections"]), json.dumps(m["reasons"]))
            for m in diagnosis["members"]
        ),
    }


async def test_explain_a_gang_that_does_not_fit_then_apply_the_fix(
    cluster: SimCluster, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    bindings = Bindings(cluster)
    # 3 nodes of 4 cpu; 4 members of 3 cpu each: one per node, the quorum is 4.
    cluster.store.create("podgroups.scheduling.x-k8s.io", coscheduling("train", 4))
    for p in gang(4):
        cluster.store.create("pods", p)
    proc, server = await start_run(kubeconfig, "--debug-token-file", str(token_file))
    try:
        # The scheduler's own diagnosis of its last attempt, through the debug endpoint.
        found: dict[str, Any] | None = None

        async def recorded() -> bool:
            nonlocal found
            found = await fetch_explanation(server, TOKEN, "podgroup", "default", "train")
            return found is not None

        for _ in range(300):
            if await recorded():
                break
            await asyncio.sleep(0.05)
        assert found is not None
        assert found["quorum"]["minCount"] == 4 and found["quorum"]["fit"] == 3
        member = found["members"][-1]
        assert member["reason"] == "Unschedulable"
        assert member["rejections"] == [
            {"extensionPoint": "Filter", "plugin": "NodeResourcesFit", "nodes": 3}
        ]

        # No token: 401; another token: 403 (the CLI exits 3 on either).
        with pytest.raises(DebugEndpointError) as missing:
            await fetch_explanation(server, "", "podgroup", "default", "train")
        assert missing.value.status == 401
        with pytest.raises(DebugEndpointError) as wrong:
            await fetch_explanation(server, "not-the-token", "podgroup", "default", "train")
        assert wrong.value.status == 403
        bad = tmp_path / "bad-token"
        bad.write_text("not-the-token")
        code, _, err = await troupe(
            "explain", "podgroup", "default/train", "--kubeconfig", str(kubeconfig),
            "--server", server, "--token-file", str(bad), "--no-fixes",
        )  # fmt: skip
        assert code == 3 and "403" in err

        # The command: the reason, the quorum, per node the shortfall, and checked fixes.
        code, text, err = await troupe(
            "explain", "podgroup", "default/train", "--kubeconfig", str(kubeconfig),
            "--server", server, "--token-file", str(token_file),
        )  # fmt: skip
        assert code == 0, err
        print(text)
        assert "podgroup default/train (diagnosis: scheduler" in text
        assert "3 of 4 required pods fit" in text
        assert "Filter/NodeResourcesFit: 3 node(s)" in text
        assert "minCount 4 (spec.minMember)" in text
        assert "short" in text.lower()
        assert "lower minCount to 3 (spec.minMember)" in text
        fix = re.search(r"add (\d+) more nodes? like (\S+)", text)
        assert fix is not None, text

        # -o json: the same, for tools.
        code, out, err = await troupe(
            "explain", "podgroup", "default/train", "--kubeconfig", str(kubeconfig),
            "--server", server, "--token-file", str(token_file), "-o", "json",
        )  # fmt: skip
        assert code == 0, err
        report = json.loads(out)
        assert report["source"] == "scheduler"
        assert report["target"] == {"kind": "podgroup", "name": "default/train"}
        assert {"quorum", "members", "message", "preemption", "group"} <= set(report["diagnosis"])
        assert report["capacity"]["request"] == {"cpu": 3000}
        assert [f["kind"] for f in report["fixes"]] == ["addNodes", "lowerMinCount"]
        assert all(f["verified"] for f in report["fixes"])

        # --offline, no scheduler asked: the same diagnosis.
        code, out, err = await troupe(
            "explain", "podgroup", "default/train", "--kubeconfig", str(kubeconfig),
            "--offline", "--no-fixes", "-o", "json",
        )  # fmt: skip
        assert code == 0, err
        offline = json.loads(out)
        assert offline["source"] == "offline"
        assert shape(offline["diagnosis"]) == shape(report["diagnosis"])

        # Apply the suggested fix for real: the gang binds.
        count, like = int(fix.group(1)), fix.group(2)
        model = cluster.store.get("nodes", like)
        for i in range(count):
            node = copy.deepcopy(model)
            node["metadata"] = {
                "name": f"added-{i}",
                "labels": {**model["metadata"]["labels"], "kubernetes.io/hostname": f"added-{i}"},
            }
            cluster.store.create("nodes", node)
        await eventually(lambda: len(bindings.node) == 4, timeout=30, what="the gang bound")
        # Bound: nothing is remembered of it any more.
        await eventually(lambda: True)
        for _ in range(100):
            if await fetch_explanation(server, TOKEN, "podgroup", "default", "train") is None:
                break
            await asyncio.sleep(0.05)
        assert await fetch_explanation(server, TOKEN, "podgroup", "default", "train") is None
    finally:
        await stop_run(proc)


async def test_offline_explains_a_v1beta1_pod_group_and_a_lone_pod(
    cluster: SimCluster, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    cluster.store.create(
        "podgroups.scheduling.k8s.io",
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "beta", "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
        },
    )
    for i in range(4):
        cluster.store.create(
            "pods", pod(f"beta-{i}", cpu="3", schedulingGroup={"podGroupName": "beta"})
        )
    cluster.store.create("pods", pod("big", cpu="6"))
    code, out, err = await troupe(
        "explain", "podgroup", "default/beta", "--kubeconfig", str(kubeconfig), "--offline",
        "-o", "json",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    d = report["diagnosis"]
    assert d["group"]["kind"] == "PodGroup" and d["group"]["api"] == "scheduling.k8s.io/v1alpha2"
    assert d["quorum"]["minCount"] == 4 and d["quorum"]["fit"] == 3
    assert d["quorum"]["minCountField"] == "spec.schedulingPolicy.gang.minCount"
    fixes = {f["kind"]: f for f in report["fixes"]}
    assert fixes["lowerMinCount"]["minCount"] == 3
    assert fixes["addNodes"]["count"] == 1

    code, text, err = await troupe(
        "explain", "pod", "default/big", "--kubeconfig", str(kubeconfig), "--offline"
    )
    assert code == 0, err
    print(text)
    assert "Filter/NodeResourcesFit: 3 node(s)" in text
    assert "3 Insufficient cpu" in text
    assert "add 1 more node like" not in text  # no node of 4 cpu can hold 6


# kube-apiserver --token-auth-file lines: token,user,uid,"groups".
TOKEN_AUTH_FILE = """\
alice-token-0123456789,alice,1001,"sre"
bob-token-0123456789,bob,1002
"""
RBAC = "rbac.authorization.k8s.io"


async def test_delegated_auth_asks_the_api_server_who_may_read_the_diagnosis(
    tmp_path: Path,
) -> None:
    """``troupe run --debug-auth=delegated``: the caller's token goes through a
    TokenReview and the user through a SubjectAccessReview for get on the path,
    answered by the embedded API server from its token file and RBAC objects."""
    users_file = tmp_path / "tokens.csv"
    users_file.write_text(TOKEN_AUTH_FILE)
    tokens = {}
    for user in ("alice", "bob", "mallory"):
        tokens[user] = tmp_path / f"{user}.token"
        tokens[user].write_text(f"{user}-token-0123456789\n")
    cluster = SimCluster(
        [NodeSpec(count=3, cpu="4", memory="16Gi", zones=("zone-a", "zone-b"))],
        bookmark_interval=0.5,
        token_users=TokenUsers.from_file(users_file),
    )
    async with cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        cluster.store.create(
            f"clusterroles.{RBAC}",
            {
                "metadata": {"name": "troupe-explain"},
                "rules": [{"nonResourceURLs": ["/debug/troupe/explain"], "verbs": ["get"]}],
            },
        )
        cluster.store.create(
            f"clusterrolebindings.{RBAC}",
            {
                "metadata": {"name": "troupe-explain-alice"},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "troupe-explain"},
                "subjects": [{"apiGroup": RBAC, "kind": "User", "name": "alice"}],
            },
        )
        cluster.store.create("podgroups.scheduling.x-k8s.io", coscheduling("train", 4))
        for p in gang(4):
            cluster.store.create("pods", p)
        audit = cluster.server.start_audit()
        proc, server = await start_run(kubeconfig, "--debug-auth=delegated")
        try:
            alice = "alice-token-0123456789"
            found = None
            for _ in range(300):
                found = await fetch_explanation(server, alice, "podgroup", "default", "train")
                if found is not None:
                    break
                await asyncio.sleep(0.05)
            assert found is not None and found["quorum"]["fit"] == 3
            reviews = [r.path for r in audit if r.method == "POST" and "reviews" in r.path]
            assert "/apis/authentication.k8s.io/v1/tokenreviews" in reviews
            assert "/apis/authorization.k8s.io/v1/subjectaccessreviews" in reviews

            # bob authenticates but no binding lets him: 403. An unknown token, or
            # none: 401.
            refusals = {}
            for token in ("bob-token-0123456789", "mallory-token-0123456789", ""):
                with pytest.raises(DebugEndpointError) as refused:
                    await fetch_explanation(server, token, "podgroup", "default", "train")
                refusals[token] = refused.value
            assert refusals["bob-token-0123456789"].status == 403
            assert 'User "bob" cannot get path "/debug/troupe/explain"' in str(
                refusals["bob-token-0123456789"]
            )
            assert refusals["mallory-token-0123456789"].status == 401
            assert refusals[""].status == 401

            # The command: alice reads the diagnosis; bob and an unknown token exit 3.
            base = ("explain", "podgroup", "default/train", "--kubeconfig", str(kubeconfig),
                    "--server", server, "--no-fixes")  # fmt: skip
            code, text, err = await troupe(*base, "--token-file", str(tokens["alice"]))
            assert code == 0, err
            assert "3 of 4 required pods fit" in text
            code, _, err = await troupe(*base, "--token-file", str(tokens["bob"]))
            assert code == 3 and "403" in err
            code, _, err = await troupe(*base, "--token-file", str(tokens["mallory"]))
            assert code == 3 and "401" in err
        finally:
            await stop_run(proc)


async def test_explain_a_composite_pod_group_live_and_offline(
    cluster: SimCluster, tmp_path: Path
) -> None:
    """A CompositePodGroup (a driver PodGroup of 1 and workers needing 6 of 8, both
    required) with room for the driver and 5 workers: its members are the pods of its
    PodGroups, for the scheduler's diagnosis and for the fixes' copies alike."""
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    bindings = Bindings(cluster)
    for node in ("node-0", "node-1", "node-2"):
        for j in range(2):
            cluster.store.create("pods", pod(f"filler-{node}-{j}", cpu="1", nodeName=node))
    cluster.store.create(COMPOSITES, composite("job", 2))
    cluster.store.create("podgroups.scheduling.k8s.io", child("driver", 1, "job"))
    cluster.store.create("podgroups.scheduling.k8s.io", child("workers", 6, "job"))
    cluster.store.create("pods", member("driver", 0))
    for i in range(8):
        cluster.store.create("pods", member("workers", i))
    proc, server = await start_run(kubeconfig, "--debug-token-file", str(token_file))
    try:
        for _ in range(300):
            if await fetch_explanation(server, TOKEN, "podgroup", "default", "job"):
                break
            await asyncio.sleep(0.05)
        reports = {}
        for source, how in (
            ("scheduler", ("--server", server, "--token-file", str(token_file))),
            ("offline", ("--offline",)),
        ):
            base = ("explain", "podgroup", "default/job", "--kubeconfig", str(kubeconfig), *how)
            code, out, err = await troupe(*base, "-o", "json")
            assert code == 0, err
            reports[source] = json.loads(out)
            code, text, err = await troupe(*base)
            assert code == 0, err
            print(text)
            assert (
                "composite default/job: 1 of 2 required groups fit (driver 1/1, workers 5/6)"
                in text
            )
            assert "minCount 7 (spec.schedulingPolicy.gang.minGroupCount)" in text
            assert "pending pods: 9" in text
            assert "add 1 more node like" in text
            assert re.search(
                r"free 1 cpu on node-\d \(move 1 pod: default/filler-node-\d-\d\)", text
            )
        live, offline = reports["scheduler"], reports["offline"]
        assert live["diagnosis"]["group"]["kind"] == "CompositePodGroup"
        assert shape(offline["diagnosis"]) == shape(live["diagnosis"])
        for report in (live, offline):
            assert [f["kind"] for f in report["fixes"]] == ["addNodes", "freeCapacity"]
            assert len(report["fixes"][1]["placement"]) == 7

        # Move the pod the scheduler's report names: the driver and 6 workers bind.
        (victim,) = live["fixes"][1]["pods"]
        cluster.store.delete("pods", victim.split("/")[1], "default", grace_period_seconds=0)
        await eventually(
            lambda: (
                sum(k.startswith(("default/driver-", "default/workers-")) for k in bindings.node)
                == 7
            ),
            timeout=30,
            what="the driver and 6 workers bound",
        )
    finally:
        await stop_run(proc)
