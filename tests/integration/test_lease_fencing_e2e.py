"""Two ``troupe run`` replicas; while the leader binds a burst, someone else deletes the
Lease, gives it to the standby, or sets its duration to 0. The old leader sees it on
its Lease watch and sends nothing more: every write the API server accepted from it
after the change was on the wire, or already answered, when it observed the change
(the closure its log reports); it exits 1, the standby takes over through the
normal acquisition and binds the rest, each pod once.

The renewals are slow here (``retryPeriod`` 2 s) so that only the watch, not the
next renewal, can explain a prompt stop; judged from the server's write record.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod
from tests.integration.test_leader_election import (
    LEASE,
    holder,
    lease_spec,
    log_entries,
    served_port,
    start_replica,
)

PROFILE = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: 10
  burst: 2
leaderElection:
  leaderElect: true
  leaseDuration: 8s
  renewDeadline: 6s
  retryPeriod: 2s
  resourceName: {LEASE}
  resourceNamespace: kube-system
"""
LEASES = "leases.coordination.k8s.io"
PODS = 40


def deleted(cluster: SimCluster, _: str) -> None:
    cluster.store.delete(LEASES, LEASE, "kube-system")


def given_to_the_standby(cluster: SimCluster, standby: str) -> None:
    lease = cluster.store.get(LEASES, LEASE, "kube-system")
    lease["spec"]["holderIdentity"] = standby
    cluster.store.update(LEASES, lease)


def zero_duration(cluster: SimCluster, _: str) -> None:
    lease = cluster.store.get(LEASES, LEASE, "kube-system")
    lease["spec"]["leaseDurationSeconds"] = 0
    cluster.store.update(LEASES, lease)


def lease_version(cluster: SimCluster) -> str:
    return str(cluster.store.get(LEASES, LEASE, "kube-system")["metadata"]["resourceVersion"])


def identity(log: Path) -> str:
    return next((str(e["identity"]) for e in log_entries(log) if e.get("identity")), "")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        pytest.param(deleted, "lease deleted", id="deleted"),
        pytest.param(
            given_to_the_standby, "lease taken by another replica", id="given to the standby"
        ),
        pytest.param(
            zero_duration,
            "lease duration no longer covers the last renewal",
            id="leaseDurationSeconds 0",
        ),
    ],
)
async def test_the_old_leader_sends_nothing_after_it_sees_the_lease_change(
    cluster: SimCluster,
    tmp_path: Path,
    change: Callable[[SimCluster, str], None],
    reason: str,
) -> None:
    bindings = Bindings(cluster)
    ledger = cluster.server.record_writes("kube-system", LEASE)
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    procs = {n: await start_replica(n, tmp_path, kubeconfig, PROFILE) for n in ("a", "b")}
    logs = {n: tmp_path / f"{n}.log" for n in procs}

    def log_tail() -> str:
        return "\n".join(f"--- {n}:\n" + logs[n].read_text()[-2000:] for n in procs)

    try:
        await eventually(lambda: all(served_port(f) for f in logs.values()), 30, log_tail)
        await eventually(lambda: holder(cluster) in procs, 20, log_tail)
        old = holder(cluster)
        standby = next(n for n in procs if n != old)
        await eventually(lambda: bool(identity(logs[standby])), 20, log_tail)
        old_id, standby_id = identity(logs[old]), identity(logs[standby])
        for i in range(PODS):
            cluster.store.create("pods", pod(f"p-{i}", cpu="50m"))
        # Mid-burst: qps 10 binds the 40 pods over about 4 s.
        await eventually(lambda: len(bindings.node) >= 5, 20, log_tail)
        # Right after a renewal lands: the next one is retryPeriod away, so only the
        # watch can be what shows the old leader the change.
        renewed = lease_version(cluster)
        await eventually(lambda: lease_version(cluster) != renewed, 10, log_tail)
        changed_at = len(ledger.writes)
        change(cluster, standby_id)
        code = await asyncio.wait_for(procs[old].wait(), 20)
        await eventually(lambda: len(bindings.node) == PODS, 30, log_tail)
    finally:
        for proc in procs.values():
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert code == 1, log_tail()
    assert bindings.twice() == []
    closures = [e for e in log_entries(logs[old]) if "writesOnTheWire" in e]
    closure = closures[0] if closures else {"monotonicTime": float("-inf"), "writesOnTheWire": []}
    wire = Counter(closure["writesOnTheWire"])
    sent_after_closure: list[str] = []
    for w in ledger.writes[changed_at:]:
        if "/leases" in w.path or f"({old_id})" not in w.user_agent:
            continue
        what = f"{w.method} {w.path}"
        if w.at < closure["monotonicTime"]:
            continue  # accepted, so sent, before it saw the change
        if wire[what] > 0:
            wire[what] -= 1  # on the wire when it saw the change
            continue
        sent_after_closure.append(what)
    assert sent_after_closure == [], log_tail()
    assert [(c["msg"], c["level"], c["seenBy"]) for c in closures] == [(reason, "error", "watch")]
    # The standby leads through the normal acquisition and bound the rest.
    spec = lease_spec(cluster)
    assert spec["holderIdentity"] == standby_id and spec["leaseDurationSeconds"] == 8
    assert old_id != standby_id
