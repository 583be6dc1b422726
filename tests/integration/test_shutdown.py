"""SIGTERM stops troupe within a few seconds, whatever it holds.

A Deployment's pod gets ``terminationGracePeriodSeconds`` (30 s by default) before
it is killed. After a large run the interpreter used to spend longer freeing every
object one by one than the whole orderly stop took (about 12 s after 10,000 pods
in ``troupe sim --serve``); ``troupe`` now exits as soon as it has stopped.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

import aiohttp
import yaml

from tests.integration.test_sim_serve import free_port

PODS = 6000
# Well within a pod's grace period, and above the ~3.5 s an orderly stop takes here.
STOP_DEADLINE = 6.0

PROFILE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {qps: 5000, burst: 5000}
"""


def pod(i: int) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p{i}", "namespace": "default", "labels": {"i": str(i)}},
        "spec": {
            "schedulerName": "troupe-scheduler",
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "10m"}}}
            ],
        },
    }


async def load(url: str) -> None:
    """Create PODS pods and wait until every one is bound."""
    async with aiohttp.ClientSession() as session:
        limit = asyncio.Semaphore(32)

        async def create(i: int) -> None:
            async with limit, session.post(f"{url}/api/v1/namespaces/default/pods", json=pod(i)):
                pass

        await asyncio.gather(*(create(i) for i in range(PODS)))
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            query = "fieldSelector=spec.nodeName%3D&limit=1"
            async with session.get(f"{url}/api/v1/pods?{query}") as resp:
                page = await resp.json()
            if not page["items"]:
                return
            await asyncio.sleep(0.5)
        raise AssertionError("the pods were not all bound")


async def test_troupe_sim_serve_stops_within_seconds_of_sigterm_after_a_large_run(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "troupe",
        "sim",
        "--serve",
        "--nodes",
        "100",
        "--config",
        str(profile),
        "--port",
        str(free_port()),
        "--kubeconfig-out",
        str(kubeconfig),
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        while b"serving" not in await asyncio.wait_for(proc.stderr.readline(), 60):
            pass
        url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        await load(url)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), 60)
        stopped_in = time.monotonic() - started
        assert proc.returncode == 0
        assert stopped_in < STOP_DEADLINE, f"stopped {stopped_in:.1f}s after SIGTERM"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
