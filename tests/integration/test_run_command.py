"""``troupe run`` as a process: start-up errors (each reported on a JSON log line, never
a traceback), and SIGTERM during a burst of bindings."""

from __future__ import annotations

import asyncio
import json
import resource
import signal
import sys
from pathlib import Path
from typing import Any

from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod


async def run_troupe(*args: str, **popen: Any) -> asyncio.subprocess.Process:
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
        **popen,
    )


UNREACHABLE_KUBECONFIG = (
    "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:9'}\n"
    "users:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
    "current-context: x\n"
)


def json_lines(err: bytes) -> list[dict[str, Any]]:
    """stderr of ``troupe run``: every line is one JSON object."""
    entries = [json.loads(line) for line in err.decode().splitlines()]
    assert all(isinstance(e, dict) and {"ts", "level", "logger", "msg"} <= set(e) for e in entries)
    return entries


async def test_a_bad_profile_fails_at_start_with_the_offending_key(tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- plugins:\n    filter:\n      enabled: [{name: NodeResourcesFitt}]\n"
    )
    proc = await run_troupe("--config", str(profile), "--kubeconfig", "/nonexistent")
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    problems = [e["err"] for e in json_lines(err) if e["msg"] == "invalid configuration"]
    assert (
        "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'NodeResourcesFitt', "
        "did you mean 'NodeResourcesFit'?"
    ) in problems


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
    (failure,) = [e for e in json_lines(err) if e["level"] == "error"]
    assert failure["msg"] == "cannot start"
    assert "127.0.0.1:9" in failure["err"]


async def test_debug_auth_flag_mistakes_fail_at_start(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret-debug-token-0123456789")
    for args, says in (
        (["--debug-auth=token"], "--debug-auth=token needs --debug-token-file"),
        (
            ["--debug-auth=delegated", "--debug-token-file", str(token)],
            "--debug-token-file is for --debug-auth=token, not delegated",
        ),
        (["--authorization-kubeconfig", "/k"], "need --debug-auth=delegated"),
    ):
        proc = await run_troupe("--kubeconfig", "/nonexistent", *args)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 1
        assert any(says in e["msg"] for e in json_lines(err)), err.decode()


async def test_delegated_debug_auth_without_reviews_is_logged_as_failing_closed(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:9'}\n"
        "users:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
        "current-context: x\n"
    )
    proc = await run_troupe(
        "--kubeconfig", str(kubeconfig), "--leader-elect=false", "--debug-auth=delegated"
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1
    entries = json_lines(err)
    serving = [e for e in entries if e["msg"].startswith("serving /metrics")]
    assert serving and serving[0]["debug_auth"] == "delegated"
    closed = [e for e in entries if e["msg"].startswith("delegated authentication")]
    assert len(closed) == 2, err.decode()
    assert "authentication.k8s.io/v1" in closed[0]["err"]
    assert "authorization.k8s.io/v1" in closed[1]["err"]
    assert all(e["level"] == "error" and "127.0.0.1:9" in e["err"] for e in closed)


async def test_a_forbidden_api_discovery_without_leader_election_exits_1_saying_so(
    cluster: SimCluster, tmp_path: Path
) -> None:
    # A ClusterRole without the discovery rule: the API server answers 403 on /apis.
    cluster.server.faults.fail("GET", r"^/apis$", 403, times=1000)
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    proc = await run_troupe("--kubeconfig", str(kubeconfig), "--leader-elect=false")
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1, err.decode()[-2000:]
    assert b"Traceback" not in err
    (failure,) = [e for e in json_lines(err) if e["level"] == "error"]
    assert failure["msg"] == "cannot start"
    assert failure["err"].startswith("403: discovery of /apis")
    assert "manifests/rbac.yaml" in failure["hint"]


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


async def test_the_file_limit_is_raised_and_the_endpoints_stay_below_it(tmp_path: Path) -> None:
    """Started with a soft file limit of 256, ``troupe run`` raises it to the hard
    limit before serving, and holds at most --max-connections, at most a quarter of it."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(UNREACHABLE_KUBECONFIG)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def low_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))

    for flag, expected in ((100_000, hard // 4), (10, 10)):
        proc = await run_troupe(
            "--kubeconfig",
            str(kubeconfig),
            "--leader-elect=false",
            "--max-connections",
            str(flag),
            preexec_fn=low_soft_limit,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        (serving,) = [e for e in json_lines(err) if e["msg"].startswith("serving /metrics")]
        assert serving["openFiles"] == hard
        assert serving["maxConnections"] == min(expected, hard // 4)
        assert serving["address"] == "0.0.0.0"


async def test_a_connection_limit_below_one_fails_at_start() -> None:
    proc = await run_troupe("--kubeconfig", "/nonexistent", "--max-connections", "0")
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    assert any("--max-connections must be at least 1" in e["msg"] for e in json_lines(err))
