"""Gang invariants end to end: generated clusters and gang sets through the embedded
API server, with a node removed while scheduling is in progress.

Complements ``tests/scheduler/gangs/test_gang_invariants.py`` (in process, one API, cpu
only, a recording client): here the daemon talks HTTP to the embedded API server,
gangs use all three APIs (scheduler-plugins PodGroup, Workload + workloadRef,
v1alpha2 PodGroup + schedulingGroup) and 1.37 CompositePodGroups (a gang of a worker
PodGroup and a driver PodGroup of one, minGroupCount 2), pods request cpu and memory on nodes with a
small pod capacity, plain pods compete with the gangs, and the invariants are
read from what the server committed, not from what the scheduler says it did.

The node removal: once the first binding is committed, one node (the node of that
binding, or one chosen by index) is deleted and the pods bound to it are deleted as
the pod garbage collector would (``SimCluster.remove_node``; a binding to that node
that lands afterwards is deleted too, as the collector's orphan sweep would).
Deleted pods are not re-created. Then a second wave of gangs is submitted.

After the system settles, for every gang that lost no member to the removal, the
number of its existing bound members is 0 or >= minCount (a gang that lost
members cannot be made whole again: bindings are not undone); of a composite, each
PodGroup has 0 or at least its minCount bound, and either both are at quorum or none.
At every moment no node's cpu, memory or pod count is exceeded; no pod's nodeName
changes once set; no UID is bound twice, and the server accepted at most one binding
per pod.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from troupe.api.config import config_document, load_config
from troupe.api.gangs import POD_GROUP_LABEL
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec

from tests.integration.gang_audit import PodLedger, accepted_bindings
from tests.integration.test_gangs_e2e import GROUPS

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
# A CompositePodGroup gang: its workers (the gang's size and minCount) and a driver of
# one, both or nothing.
COMPOSITE = "composite"
# Backoff of 1 s (instead of up to 10) keeps each example short.
CONFIG = config_document(podInitialBackoffSeconds=1, podMaxBackoffSeconds=1)


@dataclass(frozen=True)
class NodeCfg:
    cpu: int
    memory_gi: int
    pods: int
    tainted: bool


@dataclass(frozen=True)
class GangCfg:
    api: str
    size: int
    min_count: int
    cpu_m: int
    memory_mi: int
    tolerates: bool


nodes_st = st.lists(
    st.builds(
        NodeCfg,
        cpu=st.sampled_from([2, 4]),
        memory_gi=st.sampled_from([2, 4, 8]),
        pods=st.sampled_from([3, 4, 110]),
        tainted=st.booleans(),
    ),
    min_size=2,
    max_size=5,
)
gang_st = st.integers(1, 5).flatmap(
    lambda size: st.builds(
        GangCfg,
        api=st.sampled_from([*sorted(GROUPS), COMPOSITE]),
        size=st.just(size),
        min_count=st.integers(1, size),
        cpu_m=st.sampled_from([500, 1000, 2000]),
        memory_mi=st.sampled_from([256, 1024, 3072]),
        tolerates=st.booleans(),
    )
)


def member(gang: GangCfg, group: str, i: int) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": f"{group}-{i}", "namespace": "default"}
    spec: dict[str, Any] = {
        "schedulerName": "troupe-scheduler",
        "containers": [
            {
                "name": "c",
                "image": "pause",
                "resources": {
                    "requests": {"cpu": f"{gang.cpu_m}m", "memory": f"{gang.memory_mi}Mi"}
                },
            }
        ],
    }
    if gang.api == "coscheduling":
        metadata["labels"] = {POD_GROUP_LABEL: group}
    elif gang.api == "workload":
        spec["workloadRef"] = {"name": group, "podGroup": "workers"}
    else:
        spec["schedulingGroup"] = {"podGroupName": group}
    if gang.tolerates:
        spec["tolerations"] = [TOLERATION]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def plain(i: int, cpu_m: int) -> dict[str, Any]:
    """A pod of no gang, competing with the gangs for capacity."""
    pod = member(GangCfg("coscheduling", 1, 1, cpu_m, 256, False), "plain", i)
    del pod["metadata"]["labels"]
    return pod


def composite_leaves(name: str, gang: GangCfg) -> dict[str, tuple[int, int]]:
    """A composite gang's PodGroups: name -> (pods, minCount)."""
    return {f"{name}w": (gang.size, gang.min_count), f"{name}d": (1, 1)}


def submit_composite(cluster: SimCluster, name: str, gang: GangCfg) -> None:
    cluster.store.create(
        "compositepodgroups.scheduling.k8s.io",
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "workloadRef": {"workloadName": name, "templateName": "job"},
                "schedulingPolicy": {"gang": {"minGroupCount": 2}},
            },
        },
    )
    native = GangCfg("native", 1, 1, gang.cpu_m, gang.memory_mi, gang.tolerates)
    for leaf, (size, min_count) in composite_leaves(name, gang).items():
        cluster.store.create(
            "podgroups.scheduling.k8s.io",
            {
                "metadata": {"name": leaf, "namespace": "default"},
                "spec": {
                    "schedulingPolicy": {"gang": {"minCount": min_count}},
                    "parentCompositePodGroupName": name,
                },
            },
        )
        for i in range(size):
            cluster.store.create("pods", member(native, leaf, i))


def submit(cluster: SimCluster, gangs: dict[str, GangCfg]) -> None:
    for name, gang in gangs.items():
        if gang.api == COMPOSITE:
            submit_composite(cluster, name, gang)
            continue
        kind, obj = GROUPS[gang.api](name, gang.min_count)
        cluster.store.create(kind, obj)
        for i in range(gang.size):
            cluster.store.create("pods", member(gang, name, i))


def fingerprint(cluster: SimCluster, daemon: SchedulerDaemon) -> tuple[Any, ...] | None:
    """A summary of the cluster when the scheduler is idle, else None."""
    s = daemon.scheduler
    if s is None:
        return None
    counts = s.queue.pending_counts()
    if counts["active"] or counts["backoff"] or s.queue.in_flight() or len(s.bindings):
        return None
    state = []
    pods = cluster.store.list("pods", namespace="default")
    if s.cache.assumed_count or s.cache.pod_count != sum(
        1 for p in pods if p["spec"].get("nodeName")
    ):
        return None  # a binding or a deletion the cache has not seen yet
    for pod in pods:
        node = pod["spec"].get("nodeName") or ""
        key = f"default/{pod['metadata']['name']}"
        told = any(
            c.get("type") == "PodScheduled" for c in pod.get("status", {}).get("conditions", [])
        )
        if (node and key not in s.cache) or (not node and not told):
            return None  # the informers have not caught up yet
        state.append((key, node))
    return (tuple(sorted(state)), tuple(sorted(counts.items())))


async def scenario(
    nodes: list[NodeCfg],
    gangs: list[GangCfg],
    plain_cpu: list[int],
    first_wave: int,
    remove: int | None,
) -> None:
    specs = [
        NodeSpec(
            count=1,
            cpu=str(n.cpu),
            memory=f"{n.memory_gi}Gi",
            pods=n.pods,
            taints=(TAINT,) if n.tainted else (),
            name_prefix=f"n{i}",
        )
        for i, n in enumerate(nodes)
    ]
    named = {f"g{i}": g for i, g in enumerate(gangs)}
    waves = [dict(list(named.items())[:first_wave]), dict(list(named.items())[first_wave:])]
    async with SimCluster(specs, bookmark_interval=0.5) as cluster:
        audit = cluster.server.start_audit()
        ledger = PodLedger(cluster)
        resolved = load_config(CONFIG, catalog(default_registry()))
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = cluster.write_kubeconfig(Path(tmp) / "kubeconfig")
            daemon = SchedulerDaemon(
                resolved, Connection(kubeconfig=str(kubeconfig)), seed=1, sync_timeout=10
            )
            await daemon.start()
            try:
                lost = await run(cluster, daemon, ledger, waves, plain_cpu, remove)
                # Checked while the daemon still runs: stopping it must not be what
                # leaves a gang whole or partial.
                check(cluster, ledger, audit, named, lost)
            finally:
                await daemon.stop(grace=1)


async def run(
    cluster: SimCluster,
    daemon: SchedulerDaemon,
    ledger: PodLedger,
    waves: list[dict[str, GangCfg]],
    plain_cpu: list[int],
    remove: int | None,
) -> set[str]:
    """Submit, remove a node mid-run, wait until settled; the pods the simulated
    garbage collector deleted."""
    loop = asyncio.get_running_loop()
    submit(cluster, waves[0])
    for i, cpu in enumerate(plain_cpu):
        cluster.store.create("pods", plain(i, cpu))
    lost: set[str] = set()
    if remove is not None:
        # Until the first binding lands (or the scheduler is idle: nothing fits).
        deadline = loop.time() + 10
        while not ledger.bound_count and loop.time() < deadline:
            if fingerprint(cluster, daemon) is not None:
                break
            await asyncio.sleep(0.005)
        if remove < 0 and ledger.first_node:
            # The node of the first binding: some gang is being bound there.
            victim = next(iter(ledger.first_node.values()))
        else:
            victim = cluster.node_names[remove % len(cluster.node_names)]
        ledger.removed.add(victim)
        lost |= {name for _, name in ledger.on_removed_node()}
        cluster.remove_node(victim)
    submit(cluster, waves[1])
    deadline = loop.time() + 40
    last: tuple[Any, ...] | None = None
    stable_since = loop.time()
    while True:
        for ns, name in ledger.on_removed_node():
            # The pod garbage collector's orphan sweep: bound to a node that is gone.
            lost.add(name)
            cluster.store.delete("pods", name, ns, grace_period_seconds=0)
        now = fingerprint(cluster, daemon)
        if now is None or now != last:
            last, stable_since = now, loop.time()
        elif loop.time() - stable_since > 0.5:
            return lost
        assert loop.time() < deadline, "the scheduler did not settle"
        await asyncio.sleep(0.02)


def check(
    cluster: SimCluster,
    ledger: PodLedger,
    audit: list[Any],
    gangs: dict[str, GangCfg],
    lost: set[str],
) -> None:
    assert ledger.violations == []
    assert ledger.twice() == []
    accepted = accepted_bindings(audit)
    assert [k for k, n in accepted.items() if n > 1] == []
    # Every binding the store committed was one the server accepted.
    assert sum(ledger.bound_count.values()) == sum(accepted.values())
    bound: Counter[str] = Counter()
    for pod in cluster.store.list("pods", namespace="default"):
        if pod["spec"].get("nodeName"):
            bound[pod["metadata"]["name"].rsplit("-", 1)[0]] += 1
    hit = {name.rsplit("-", 1)[0] for name in lost}
    # Shown by --hypothesis-show-statistics: how much each example exercised.
    whole = sum(1 for name, g in gangs.items() if bound[name] >= g.min_count)
    event(f"gangs bound: {whole} of {len(gangs)}")
    event(f"gangs hit by the node removal: {len(hit & set(gangs))}")
    for name, gang in gangs.items():
        if gang.api == COMPOSITE:
            check_composite(name, gang, bound, hit)
        elif name not in hit:
            assert bound[name] == 0 or bound[name] >= gang.min_count, (
                f"gang {name} ({gang}) has {bound[name]} bound members"
            )


@settings(
    max_examples=12,
    deadline=None,
    # Each example runs a cluster and a daemon for seconds: shrinking a failure
    # would take many minutes, so a failing example is reported as generated.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    nodes=nodes_st,
    gangs=st.lists(gang_st, min_size=1, max_size=5),
    plain_cpu=st.lists(st.sampled_from([500, 1000, 2000]), max_size=3),
    first_wave=st.integers(0, 5),
    # None: no removal; -1: the node of the first binding; else a node by index.
    remove=st.one_of(st.none(), st.just(-1), st.integers(0, 9)),
)
def test_gangs_through_the_api_server_are_never_partly_bound(
    nodes: list[NodeCfg],
    gangs: list[GangCfg],
    plain_cpu: list[int],
    first_wave: int,
    remove: int | None,
) -> None:
    asyncio.run(scenario(nodes, gangs, plain_cpu, max(1, first_wave), remove))


def check_composite(name: str, gang: GangCfg, bound: Counter[str], hit: set[str]) -> None:
    leaves = composite_leaves(name, gang)
    if hit & set(leaves):
        return
    at_quorum = 0
    for leaf, (_, min_count) in leaves.items():
        assert bound[leaf] == 0 or bound[leaf] >= min_count, (
            f"PodGroup {leaf} of composite {name} ({gang}) has {bound[leaf]} bound members"
        )
        at_quorum += bound[leaf] >= min_count
    event(f"composites bound: {at_quorum == len(leaves)}")
    assert at_quorum in (0, len(leaves)), f"composite {name} ({gang}) partly bound: {bound}"
