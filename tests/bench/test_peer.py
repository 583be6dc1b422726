"""``python -m bench peer``: argument handling always; a real kube-scheduler when one is
given.

The peer test runs only with ``TROUPE_PEER_SCHEDULER=/path/to/kube-scheduler`` (built as
docs/benchmarks.md, "bench peer", says: kube-scheduler v1.30 with scheduler-plugins'
Coscheduling): the binary is an external artefact, so without it that one test skips.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
import yaml
from bench.server import NAMESPACE, ServerProcess

from bench import peer
from tests.bench.runner import ROOT

PEER = os.environ.get(peer.PEER_ENV, "")


def bench_peer(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", "peer", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_without_a_binary_it_exits_2_and_says_how_to_get_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != peer.PEER_ENV}
    missing = tmp_path / "kube-scheduler"
    run = bench_peer("--quick", "--scheduler-cmd", f"{missing} --config {{config}}", env=env)
    assert run.returncode == 2, run.stderr
    assert "docs/benchmarks.md" in run.stderr and peer.PEER_ENV in run.stderr
    # Neither a command nor the variable: the same.
    assert bench_peer("--quick", env=env).returncode == 2
    # A file that is not executable is no binary either.
    missing.write_text("#!/bin/sh\n")
    run = bench_peer("--quick", "--scheduler-cmd", f"{missing} --config {{config}}", env=env)
    assert run.returncode == 2


def test_the_command_must_take_the_configuration(tmp_path: Path) -> None:
    run = bench_peer("--quick", "--scheduler-cmd", "true")
    assert run.returncode == 2 and "{config}" in run.stderr


def test_arguments_and_configuration() -> None:
    p = argparse.ArgumentParser()
    peer.add_arguments(p)
    args = p.parse_args(["--quick", "--gang-shapes", "3x4", "--pods", "0"])
    peer.resolve_defaults(args)
    assert [w.name for w in peer.workloads(args)] == ["3x4"]
    assert args.nodes == 10
    with pytest.raises(SystemExit):
        p.parse_args(["--gang-shapes", "3by4"])
    profile = peer.load_profile(str(peer.PROFILES / "coscheduling-no-volumes.yaml"))
    config = peer.scheduler_config(Path("/k"), "peer", 500.0, profile)
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["clientConnection"]["contentType"] == "application/json"
    (one,) = config["profiles"]
    assert one["schedulerName"] == "peer"
    assert one["plugins"]["multiPoint"]["enabled"] == [{"name": "Coscheduling"}]


@pytest.mark.skipif(
    not (PEER and os.access(PEER, os.X_OK)),
    reason=f"no kube-scheduler binary: set {peer.PEER_ENV}=PATH (docs/benchmarks.md, bench peer)",
)
def test_a_real_kube_scheduler_binds_pods_on_the_embedded_server(tmp_path: Path) -> None:
    asyncio.run(_real_peer(tmp_path))


async def _real_peer(tmp: Path) -> None:
    kubeconfig, config = tmp / "kubeconfig", tmp / "config.yaml"
    profile = peer.load_profile(str(peer.PROFILES / "coscheduling-no-volumes.yaml"))
    config.write_text(yaml.safe_dump(peer.scheduler_config(kubeconfig, "peer", 1000.0, profile)))
    argv = ["--nodes", "3", "--pods", "5", "--pod-group-crd", "--scheduler-name", "peer"]
    argv += ["--gangs", "1", "--gang-size", "3"]
    log = tmp / "peer.log"
    async with ServerProcess(argv, kubeconfig), aiohttp.ClientSession() as session:
        url = peer.server_url(kubeconfig)
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                PEER, "--config", str(config), "--secure-port", "0", stdout=out, stderr=out
            )
            try:
                nodes = await _bound(session, url, want=8, timeout=90.0)
            finally:
                await peer.stop_process(proc)
    assert len(nodes) == 8, log.read_text()[-3000:]
    assert set(nodes.values()) <= {"node-0", "node-1", "node-2"}


async def _bound(
    session: aiohttp.ClientSession, url: str, want: int, timeout: float
) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    nodes: dict[str, str] = {}
    while time.monotonic() < deadline:
        async with session.get(f"{url}/api/v1/namespaces/{NAMESPACE}/pods") as resp:
            items = json.loads(await resp.text())["items"]
        nodes = {
            p["metadata"]["name"]: p["spec"]["nodeName"] for p in items if p["spec"].get("nodeName")
        }
        if len(nodes) >= want:
            break
        await asyncio.sleep(0.5)
    return nodes
