"""``troupe sim --serve`` driven with the real kubectl, then stopped with SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest

PEER_ENV = "TROUPE_PEER_SCHEDULER"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    exe = shutil.which("kubectl")
    assert exe, "kubectl is required for this test (.ci/run installs it)"
    proc = await asyncio.create_subprocess_exec(
        exe,
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdin=asyncio.subprocess.PIPE if stdin else None,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 30)
    assert proc.returncode == 0, err.decode()
    return out.decode()


POD = """
apiVersion: v1
kind: Pod
metadata: {name: hello, namespace: default}
spec:
  schedulerName: troupe-scheduler
  containers: [{name: c, image: pause, resources: {requests: {cpu: 100m}}}]
"""


async def test_serve_mode_schedules_what_kubectl_creates_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    port = free_port()
    metrics_port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "troupe",
        "sim",
        "--serve",
        "--port",
        str(port),
        "--kubeconfig-out",
        str(kubeconfig),
        "--nodes",
        "4",
        "--metrics-port",
        str(metrics_port),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        # The metrics line comes first (the endpoint is up before the caches sync).
        lines = [await asyncio.wait_for(proc.stderr.readline(), 60) for _ in range(2)]
        assert any(b"serving" in line for line in lines), lines
        nodes = json.loads(await kubectl(kubeconfig, "get", "nodes", "-o", "json"))
        assert len(nodes["items"]) == 4
        await kubectl(kubeconfig, "create", "-f", "-", stdin=POD)
        for _ in range(200):
            pod = json.loads(await kubectl(kubeconfig, "get", "pod", "hello", "-o", "json"))
            if pod["spec"].get("nodeName"):
                break
            await asyncio.sleep(0.05)
        assert pod["spec"]["nodeName"].startswith("node-")
        # The scheduler's endpoints, as for a real deployment.
        async with aiohttp.ClientSession() as session:
            base = f"http://127.0.0.1:{metrics_port}"
            async with session.get(base + "/readyz") as resp:
                assert resp.status == 200
            async with session.get(base + "/metrics") as resp:
                text = await resp.text()
        assert (
            'scheduler_schedule_attempts_total{profile="troupe-scheduler",result="scheduled"} 1.0'
            in text
        )
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 20)
        assert proc.returncode == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_serve_without_scheduler_leaves_scheduling_to_troupe_run_in_its_own_process(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    sim = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "troupe",
        "sim",
        "--serve",
        "--no-scheduler",
        "--port",
        str(free_port()),
        "--kubeconfig-out",
        str(kubeconfig),
        "--nodes",
        "2",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    run: asyncio.subprocess.Process | None = None
    try:
        assert sim.stderr is not None
        line = await asyncio.wait_for(sim.stderr.readline(), 60)
        assert b"no scheduler" in line, line
        await kubectl(kubeconfig, "create", "-f", "-", stdin=POD)
        await asyncio.sleep(1.0)
        pod = json.loads(await kubectl(kubeconfig, "get", "pod", "hello", "-o", "json"))
        assert "nodeName" not in pod["spec"] and pod["status"]["phase"] == "Pending"
        # The scheduler, in a process of its own, against the kubeconfig written.
        run = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "troupe",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--port",
            "0",
            "--log-level",
            "warning",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await kubectl(
            kubeconfig,
            "wait",
            "--for=jsonpath={.status.phase}=Running",
            "pod/hello",
            "--timeout=25s",
        )
        pod = json.loads(await kubectl(kubeconfig, "get", "pod", "hello", "-o", "json"))
        assert pod["spec"]["nodeName"].startswith("node-")
        run.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(run.wait(), 20) == 0
        sim.send_signal(signal.SIGTERM)
        await asyncio.wait_for(sim.wait(), 20)
        assert sim.returncode == 0
    finally:
        for proc in (run, sim):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()


DEFAULT_SCHEDULER_POD = """
apiVersion: v1
kind: Pod
metadata: {name: upstream, namespace: default}
spec:
  containers: [{name: c, image: pause, resources: {requests: {cpu: 100m}}}]
"""


@pytest.mark.skipif(
    not os.environ.get(PEER_ENV),
    reason=f"needs a kube-scheduler binary in ${PEER_ENV} (docs/benchmarks.md, bench peer)",
)
async def test_an_unmodified_kube_scheduler_default_profile_binds_on_the_embedded_cluster(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    config = tmp_path / "scheduler.yaml"
    # Upstream's default profile, untouched: only the connection is set (the embedded
    # cluster speaks JSON, no protobuf) and there is a single replica.
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        f"clientConnection: {{kubeconfig: {kubeconfig}, contentType: application/json}}\n"
        "leaderElection: {leaderElect: false}\n"
    )
    sim = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "troupe",
        "sim",
        "--serve",
        "--no-scheduler",
        "--port",
        str(free_port()),
        "--kubeconfig-out",
        str(kubeconfig),
        "--nodes",
        "3",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    peer: asyncio.subprocess.Process | None = None
    try:
        assert sim.stderr is not None
        await asyncio.wait_for(sim.stderr.readline(), 60)
        peer = await asyncio.create_subprocess_exec(
            os.environ[PEER_ENV],
            "--config",
            str(config),
            "--secure-port",
            "0",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await kubectl(kubeconfig, "create", "-f", "-", stdin=DEFAULT_SCHEDULER_POD)
        await kubectl(
            kubeconfig,
            "wait",
            "--for=jsonpath={.status.phase}=Running",
            "pod/upstream",
            "--timeout=50s",
        )
        pod = json.loads(await kubectl(kubeconfig, "get", "pod", "upstream", "-o", "json"))
        assert pod["spec"]["nodeName"].startswith("node-")
    finally:
        for proc in (peer, sim):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()


async def test_serve_with_a_token_auth_file_authenticates_its_users(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    users = tmp_path / "tokens.csv"
    users.write_text('alice-token,alice,1001,"sre,oncall"\n')
    port = free_port()
    sim = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "troupe", "sim", "--serve", "--no-scheduler",
        "--port", str(port), "--kubeconfig-out", str(kubeconfig), "--nodes", "0",
        "--token-auth-file", str(users),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert sim.stderr is not None
        line = await asyncio.wait_for(sim.stderr.readline(), 60)
        assert b"no scheduler" in line, line
        review = await kubectl(
            kubeconfig, "create", "-o", "json", "-f", "-",
            stdin=json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                              "spec": {"token": "alice-token"}}),
        )  # fmt: skip
        assert json.loads(review)["status"]["user"] == {
            "username": "alice",
            "uid": "1001",
            "groups": ["sre", "oncall", "system:authenticated"],
        }
        url = f"http://127.0.0.1:{port}/api/v1/namespaces"
        async with aiohttp.ClientSession() as session:
            for token, expected in (("alice-token", 200), ("nobody-token", 401)):
                headers = {"Authorization": f"Bearer {token}"}
                async with session.get(url, headers=headers) as resp:
                    assert resp.status == expected, token
        sim.send_signal(signal.SIGTERM)
        await asyncio.wait_for(sim.wait(), 20)
        assert sim.returncode == 0
    finally:
        if sim.returncode is None:
            sim.kill()
            await sim.wait()


async def test_a_token_auth_file_needs_serve(tmp_path: Path) -> None:
    users = tmp_path / "tokens.csv"
    users.write_text("t,u,1\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "troupe", "sim", "--token-auth-file", str(users),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2 and b"--token-auth-file needs --serve" in err
