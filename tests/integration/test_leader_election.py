"""Two ``troupe run`` processes against one embedded cluster: one schedules, the other
stands by; kill -9 the leader and the standby takes over, binding every pod once and
the pending gang whole; SIGTERM the new leader and it exits 0 releasing the lease.
A leader whose lease another holder takes exits 1 and logs why."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from troupe import __version__
from troupe.api.gangs import POD_GROUP_LABEL
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod

LEASE = "troupe-ha"
PROFILE = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: 2s
  renewDeadline: 1.5s
  retryPeriod: 0.3s
  resourceName: {LEASE}
  resourceNamespace: kube-system
"""


def served_port(log: Path) -> int | None:
    """The port a replica started with ``--port 0`` logged it serves on; asking the OS
    for the port avoids racing other sockets for one picked in advance."""
    for line in log.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and str(entry.get("msg", "")).startswith("serving /metrics"):
            return int(entry["port"])
    return None


async def probe(port: int, path: str) -> int:
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}{path}", timeout=aiohttp.ClientTimeout(2)) as resp,
        ):
            return resp.status
    except (aiohttp.ClientError, OSError, TimeoutError):
        return 0


async def leader_status(port: int) -> float | None:
    """``leader_election_master_status{name=LEASE}`` as the replica's /metrics says."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as resp,
    ):
        text = await resp.text()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "leader_election_master_status" and sample.labels == {"name": LEASE}:
                return sample.value
    return None


async def start_replica(
    name: str, tmp_path: Path, kubeconfig: Path, profile_text: str = PROFILE
) -> asyncio.subprocess.Process:
    profile = tmp_path / "profile.yaml"
    profile.write_text(profile_text)
    # Logs to files: nobody drains a pipe of a process that is about to be killed.
    out = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
    try:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "troupe",
            "run",
            "--config",
            str(profile),
            "--kubeconfig",
            str(kubeconfig),
            "--log-level",
            "info",
            "--shutdown-grace",
            "1",
            "--bind-address",
            "127.0.0.1",
            "--port",
            "0",
            stdout=out,
            stderr=out,
            env={**os.environ, "POD_NAME": name},
        )
    finally:
        out.close()


def log_entries(log: Path) -> list[dict[str, Any]]:
    """Every line a replica wrote: each one is a JSON object."""
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(isinstance(e, dict) and {"ts", "level", "logger", "msg"} <= set(e) for e in entries)
    return entries


def lease_spec(cluster: SimCluster) -> dict[str, Any]:
    found = cluster.store.list("leases.coordination.k8s.io", namespace="kube-system")
    lease = next((obj for obj in found if obj["metadata"]["name"] == LEASE), None)
    return dict(lease["spec"]) if lease is not None else {}


def holder(cluster: SimCluster) -> str:
    return str(lease_spec(cluster).get("holderIdentity") or "").split("_")[0]


def reporters(cluster: SimCluster) -> set[str]:
    return {
        e["reportingInstance"]
        for e in cluster.store.list("events.events.k8s.io", namespace="default")
        if e["reason"] == "Scheduled"
    }


async def test_the_standby_takes_over_a_killed_leader_and_binds_every_pod_once(
    cluster: SimCluster, tmp_path: Path
) -> None:
    bindings = Bindings(cluster)
    ledger = cluster.server.record_writes("kube-system", LEASE)
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    procs = {name: await start_replica(name, tmp_path, kubeconfig) for name in ("a", "b")}

    def log_tail() -> str:
        return "\n".join(f"--- {n}:\n" + (tmp_path / f"{n}.log").read_text()[-1500:] for n in procs)

    try:
        # Each replica serves its probes before anything else; start-up can be slow.
        await eventually(
            lambda: all(served_port(tmp_path / f"{n}.log") for n in procs),
            timeout=30,
            what=log_tail,
        )
        await eventually(lambda: holder(cluster) in procs, timeout=20, what="a leader")
        leader = holder(cluster)
        standby = next(n for n in procs if n != leader)
        for i in range(10):
            cluster.store.create("pods", pod(f"before-{i}", cpu="100m"))
        await eventually(lambda: len(bindings.node) == 10, timeout=20, what=log_tail)
        await eventually(lambda: bool(reporters(cluster)), timeout=10, what="Scheduled events")
        assert reporters(cluster) == {leader}, "only the leader schedules"
        assert holder(cluster) == leader
        # Both are live and ready: the leader synced, the standby standing by healthily.
        for name in procs:
            port = served_port(tmp_path / f"{name}.log")
            assert port is not None, log_tail()
            assert [await probe(port, p) for p in ("/livez", "/readyz")] == [200, 200], log_tail()
            assert await leader_status(port) == (1 if name == leader else 0)

        # A gang and more pods arrive; the leader dies mid-way without releasing.
        cluster.store.create(
            "podgroups.scheduling.x-k8s.io",
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "gang", "namespace": "default"},
                "spec": {"minMember": 4},
            },
        )
        for i in range(10):
            cluster.store.create("pods", pod(f"after-{i}", cpu="100m"))
            if i == 2:
                procs[leader].kill()
        for i in range(4):
            cluster.store.create(
                "pods", pod(f"gang-{i}", cpu="1", metadata={"labels": {POD_GROUP_LABEL: "gang"}})
            )
        await procs[leader].wait()
        killed_at = asyncio.get_running_loop().time()
        await eventually(lambda: holder(cluster) == standby, timeout=10, what=log_tail)
        assert asyncio.get_running_loop().time() - killed_at < 6, "takeover within a few seconds"
        await eventually(lambda: len(bindings.node) == 24, timeout=20, what=log_tail)
        assert bindings.twice() == []
        assert all(f"default/gang-{i}" in bindings.node for i in range(4)), "the gang is whole"
        assert lease_spec(cluster)["leaseTransitions"] >= 1
        # Each write names its replica's lease identity, which held the lease then.
        writes = [w for w in ledger.writes if "/leases" not in w.path]
        assert {w.user_agent.split("(")[0] for w in writes} == {f"troupe-scheduler/{__version__} "}
        assert [w for w in writes if f"({w.holder_at_arrival})" not in w.user_agent] == []
        assert {w.holder_at_arrival.split("_")[0] for w in writes} == {leader, standby}

        # A clean shutdown releases the lease.
        procs[standby].send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(procs[standby].wait(), 15) == 0, log_tail()
        spec = lease_spec(cluster)
        assert spec["holderIdentity"] == ""
        assert spec["leaseDurationSeconds"] == 1
    finally:
        for proc in procs.values():
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def test_a_leader_whose_lease_is_taken_stops_and_exits_1_saying_why(
    cluster: SimCluster, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    proc = await start_replica("a", tmp_path, kubeconfig)
    log = tmp_path / "a.log"
    try:
        await eventually(lambda: holder(cluster) == "a", timeout=30, what=log.read_text)
        # Another holder writes the lease through the API server (a replica that saw
        # it expire, or an operator): the leader's next renewal conflicts, re-reads.
        lease = cluster.store.get("leases.coordination.k8s.io", LEASE, "kube-system")
        lease["spec"].update(holderIdentity="thief_1", leaseDurationSeconds=60)
        cluster.store.update("leases.coordination.k8s.io", lease)
        code = await asyncio.wait_for(proc.wait(), 15)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == 1, log.read_text()[-2000:]
    entries = log_entries(log)
    taken = [e for e in entries if e["msg"] == "lease taken by another replica"]
    assert [e["holder"] for e in taken] == ["thief_1"]
    lost = [e for e in entries if e["msg"].startswith("leaderelection lost")]
    assert [(e["level"], e["lease"]) for e in lost] == [("error", f"kube-system/{LEASE}")]
    # It stopped without writing over the new holder's lease.
    assert lease_spec(cluster)["holderIdentity"] == "thief_1"


async def test_a_leader_paused_past_its_lease_binds_nothing_when_it_resumes(
    cluster: SimCluster, tmp_path: Path
) -> None:
    bindings = Bindings(cluster)
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    proc = await start_replica("a", tmp_path, kubeconfig)
    log = tmp_path / "a.log"
    try:
        await eventually(lambda: holder(cluster) == "a", timeout=30, what=log.read_text)
        for i in range(3):
            cluster.store.create("pods", pod(f"before-{i}", cpu="100m"))
        await eventually(lambda: len(bindings.node) == 3, timeout=20, what=log.read_text)
        # The process is paused (a VM pause, a long GC pause, SIGSTOP) longer than its
        # lease; meanwhile another replica takes the lease and pods arrive.
        proc.send_signal(signal.SIGSTOP)
        lease = cluster.store.get("leases.coordination.k8s.io", LEASE, "kube-system")
        lease["spec"].update(holderIdentity="b_1", leaseDurationSeconds=60)
        cluster.store.update("leases.coordination.k8s.io", lease)
        for i in range(20):
            cluster.store.create("pods", pod(f"during-{i}", cpu="100m"))
        await asyncio.sleep(3)
        # Its lease requests answer slowly: it cannot learn of the new holder quickly.
        cluster.server.faults.delay("*", r"/leases", 3.0, times=100)
        audit = cluster.server.start_audit()
        proc.send_signal(signal.SIGCONT)
        code = await asyncio.wait_for(proc.wait(), 30)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            await proc.wait()
    assert code == 1, log.read_text()[-2000:]
    assert sorted(bindings.node) == [f"default/before-{i}" for i in range(3)]
    writes = [(r.method, r.path) for r in audit if r.method != "GET" and "/leases" not in r.path]
    assert writes == [], "a replica that cannot prove its lease sends no write"
    entries = log_entries(log)
    # Whichever it learns first on waking: its renew deadline has passed, or (the
    # Lease watch's event, sent while it was stopped) another replica holds it.
    reasons = ("lease not renewed within the renew deadline", "lease taken by another replica")
    assert any(e["msg"].startswith(reasons) for e in entries)
