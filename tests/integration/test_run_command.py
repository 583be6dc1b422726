"""``troupe run`` as a process: start-up errors, and SIGTERM during a burst of bindings."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from troupe.scheduler.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod


async def run_troupe(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "troupe",
        "run",
        # Any free port: a fixed one may be taken on a shared machine.
        "--port",
        "0",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def test_a_bad_profile_fails_at_start_with_the_offending_key(tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- plugins:\n    filter:\n      enabled: [{name: NodeResourcesFitt}]\n"
    )
    proc = await run_troupe("--config", str(profile), "--kubeconfig", "/nonexistent")
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    assert "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'NodeResourcesFitt'" in (
        err.decode()
    )


async def test_an_unreachable_api_server_fails_at_start_naming_it(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:9'}\n"
        "users:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
        "current-context: x\n"
    )
    proc = await run_troupe("--kubeconfig", str(kubeconfig))
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1
    assert "127.0.0.1:9" in err.decode()


async def test_sigterm_during_a_burst_of_bindings_exits_cleanly_and_loses_nothing(
    cluster: SimCluster, tmp_path: Path, start_daemon: object
) -> None:
    bindings = Bindings(cluster)
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    # Slow bindings so the signal lands while many are in flight.
    cluster.server.faults.delay("POST", r"/binding$", 0.5, times=10_000)
    for i in range(300):
        cluster.store.create("pods", pod(f"p{i}", cpu="10m"))
    proc = await run_troupe(
        "--kubeconfig", str(kubeconfig), "--log-level", "warning", "--shutdown-grace", "0.2"
    )
    try:
        await eventually(lambda: len(bindings.node) >= 10, timeout=30, what="first bindings")
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 20)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode == 0, err.decode()[-2000:]
    bound_by_first = len(bindings.node)
    assert 10 <= bound_by_first < 300
    assert bindings.twice() == []
    # Nothing was left half-done: a new scheduler binds every remaining pod, once.
    cluster.server.faults.reset()
    daemon = await start_daemon()  # type: ignore[operator]
    assert isinstance(daemon, SchedulerDaemon)
    scheduler = daemon.scheduler
    assert scheduler is not None
    await eventually(
        lambda: len(bindings.node) == 300,
        timeout=30,
        what=lambda: (
            f"all pods bound: {len(bindings.node)} bound, queue "
            f"{scheduler.queue.pending_counts()}, cache {scheduler.cache.pod_count}"
        ),
    )
    assert bindings.twice() == []
