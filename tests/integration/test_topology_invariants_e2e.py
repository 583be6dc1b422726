"""Topology invariants end to end: generated racked clusters and gang sequences through
the embedded API server.

A cluster is 2 zones x 2-3 racks x 1-2 nodes of 2-8 cpu each (labels
``topology.kubernetes.io/zone`` and ``troupe.dev/rack``). Gangs (1.37 v1beta1 PodGroups
with ``schedulingConstraints``, or scheduler-plugins PodGroups with troupe's
annotations) of 1-8 identical cpu-only pods come in waves: most alone, some together
with the previous one. Each gang asks for one rack (required), one zone with racks
preferred, or nothing. After each wave the test waits until the scheduler is idle
(every member bound or told why not) and then, from what the server committed:

(a) a gang with a required level never straddles two domains of it;
(b) a gang that prefers racks inside its zone is spread over several racks only when
    no rack of that zone had room for its quorum, and then over no more racks than
    the fewest (roomiest first) that hold it; room is counted from the cluster just
    before the gang (sum over the rack's nodes of floor(free cpu / pod cpu)), so this
    is checked for gangs submitted alone, in waves where only that gang got nodes;
(c) no pod is bound twice, no nodeName changes, no node's capacity is exceeded;
(d) no gang is partly bound: 0 or at least minCount of its members have nodes;
(e) a gang submitted alone is left pending only when no domain of its required level
    (the whole cluster, without one) had room for its quorum.

Complements ``test_topology_e2e.py`` (hand-written cases) and
``test_gang_invariants_e2e.py`` (gangs without topology, node removal), whose settling
check and settings this follows.
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
from troupe.api.topology import PREFERRED_ANNOTATION, REQUIRED_ANNOTATION
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import RACK_LABEL, ZONE_LABEL, NodeSpec

from tests.integration.gang_audit import PodLedger, accepted_bindings
from tests.integration.test_gang_invariants_e2e import fingerprint

ZONES = ("zone-a", "zone-b")
# What a gang asks for: (required, preferred).
TOPOLOGIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "rack": (RACK_LABEL, ()),
    "zone+rack": (ZONE_LABEL, (RACK_LABEL,)),
    "none": ("", ()),
}
# Backoff of 1 s (instead of up to 10) keeps each example short.
CONFIG = config_document(podInitialBackoffSeconds=1, podMaxBackoffSeconds=1)


@dataclass(frozen=True)
class GangCfg:
    api: str  # "v1beta1" (schedulingConstraints) or "coscheduling" (annotations)
    size: int
    min_count: int
    cpu_m: int
    topology: str  # a key of TOPOLOGIES
    with_previous: bool  # submitted in the same wave as the gang before it

    @property
    def required(self) -> str:
        return TOPOLOGIES[self.topology][0]

    @property
    def preferred(self) -> tuple[str, ...]:
        return TOPOLOGIES[self.topology][1]


# racks[z][r] = the cpu of each node of rack r of zone z.
racks_st = st.integers(2, 3).flatmap(
    lambda racks: st.lists(
        st.lists(
            st.lists(st.integers(2, 8), min_size=1, max_size=2), min_size=racks, max_size=racks
        ),
        min_size=len(ZONES),
        max_size=len(ZONES),
    )
)
gang_st = st.integers(1, 8).flatmap(
    lambda size: st.builds(
        GangCfg,
        api=st.sampled_from(["v1beta1", "coscheduling"]),
        size=st.just(size),
        # Often every member: quorums that outgrow a rack.
        min_count=st.one_of(st.just(size), st.integers(1, size)),
        cpu_m=st.sampled_from([1000, 2000, 3000]),
        # Most often the one with a preferred level: it has the most to get wrong.
        topology=st.sampled_from(["zone+rack", "zone+rack", "rack", "none"]),
        # Mostly alone: the preferred-level check needs the cluster just before.
        with_previous=st.sampled_from([False, False, True]),
    )
)


def node_specs(racks: list[list[list[int]]]) -> list[NodeSpec]:
    return [
        NodeSpec(
            count=1,
            cpu=str(cpu),
            memory="64Gi",
            zones=(zone,),
            racks=0,
            labels={RACK_LABEL: f"{zone}-r{r}"},
            name_prefix=f"{zone}-r{r}-n{k}",
        )
        for zone, zone_racks in zip(ZONES, racks, strict=True)
        for r, nodes in enumerate(zone_racks)
        for k, cpu in enumerate(nodes)
    ]


def submit(cluster: SimCluster, name: str, gang: GangCfg) -> None:
    annotations: dict[str, str] = {}
    if gang.preferred:
        annotations[PREFERRED_ANNOTATION] = ",".join(gang.preferred)
    spec: dict[str, Any]
    if gang.api == "v1beta1":
        kind = "podgroups.scheduling.k8s.io"
        spec = {"schedulingPolicy": {"gang": {"minCount": gang.min_count}}}
        if gang.required:
            spec["schedulingConstraints"] = {"topology": [{"key": gang.required}]}
        version = "scheduling.k8s.io/v1beta1"
    else:
        kind = "podgroups.scheduling.x-k8s.io"
        spec = {"minMember": gang.min_count}
        if gang.required:
            annotations[REQUIRED_ANNOTATION] = gang.required
        version = "scheduling.x-k8s.io/v1alpha1"
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if annotations:
        meta["annotations"] = annotations
    cluster.store.create(
        kind, {"apiVersion": version, "kind": "PodGroup", "metadata": meta, "spec": spec}
    )
    for i in range(gang.size):
        pod_meta: dict[str, Any] = {"name": f"{name}-{i}", "namespace": "default"}
        pod_spec: dict[str, Any] = {
            "schedulerName": "troupe-scheduler",
            "containers": [
                {
                    "name": "c",
                    "image": "pause",
                    "resources": {"requests": {"cpu": f"{gang.cpu_m}m"}},
                }
            ],
        }
        if gang.api == "v1beta1":
            pod_spec["schedulingGroup"] = {"podGroupName": name}
        else:
            pod_meta["labels"] = {POD_GROUP_LABEL: name}
        cluster.store.create(
            "pods", {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}
        )


@dataclass
class Snapshot:
    """The cluster as the server has it: each node's labels, free millicores and
    the node of every bound pod."""

    labels: dict[str, dict[str, str]]
    free_m: dict[str, int]
    node_of: dict[str, str]  # pod name -> node

    @classmethod
    def of(cls, cluster: SimCluster) -> Snapshot:
        labels, free = {}, {}
        for node in cluster.store.list("nodes"):
            name = node["metadata"]["name"]
            labels[name] = node["metadata"]["labels"]
            free[name] = int(node["status"]["allocatable"]["cpu"]) * 1000
        node_of = {}
        for pod in cluster.store.list("pods", namespace="default"):
            node = pod["spec"].get("nodeName")
            if node:
                node_of[pod["metadata"]["name"]] = node
                cpu = pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]
                free[node] -= int(cpu.removesuffix("m"))
        return cls(labels, free, node_of)

    def room(self, gang: GangCfg, key: str, value: str | None = None) -> dict[str, int]:
        """How many of the gang's pods each domain of ``key`` (within the zone
        ``value`` for racks, if given; ``key`` "": the whole cluster) could hold."""
        out: Counter[str] = Counter()
        for node, labels in self.labels.items():
            if value is not None and labels.get(ZONE_LABEL) != value:
                continue
            domain = labels.get(key, "") if key else ""
            out[domain] += max(self.free_m[node], 0) // gang.cpu_m
        return dict(out)

    def members(self, name: str) -> dict[str, str]:
        return {p: n for p, n in self.node_of.items() if p.rsplit("-", 1)[0] == name}


async def settle(cluster: SimCluster, daemon: SchedulerDaemon) -> None:
    """Until the scheduler is idle and the cluster unchanged for 0.3 s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    last: tuple[Any, ...] | None = None
    stable_since = loop.time()
    while True:
        now = fingerprint(cluster, daemon)
        if now is None or now != last:
            last, stable_since = now, loop.time()
        elif loop.time() - stable_since > 0.3:
            return
        assert loop.time() < deadline, "the scheduler did not settle"
        await asyncio.sleep(0.02)


def waves_of(gangs: dict[str, GangCfg]) -> list[list[str]]:
    waves: list[list[str]] = []
    for name, gang in gangs.items():
        if gang.with_previous and waves:
            waves[-1].append(name)
        else:
            waves.append([name])
    return waves


def check_alone(name: str, gang: GangCfg, before: Snapshot, after: Snapshot) -> None:
    """(b) and (e), for a gang that was the only one to get nodes in its wave."""
    placed = after.members(name)
    if not placed:
        # (e): pending only if no domain of its required level held its quorum.
        room = before.room(gang, gang.required)
        assert max(room.values(), default=0) < gang.min_count, (
            f"gang {name} ({gang}) left pending though {gang.required or 'the cluster'} "
            f"had room: {room}"
        )
        event("alone: pending, no room")
        return
    if gang.topology != "zone+rack":
        event(f"alone: {gang.topology} bound")
        return
    zones = {after.labels[n][ZONE_LABEL] for n in placed.values()}
    assert len(zones) == 1, f"gang {name} ({gang}) straddles zones {sorted(zones)}"  # (a)
    (zone,) = zones
    used = {after.labels[n][RACK_LABEL] for n in placed.values()}
    room = before.room(gang, RACK_LABEL, zone)
    if len(used) == 1:
        event("alone: zone+rack in one rack")
        return
    event("alone: zone+rack over several racks")
    # (b): spread only when no rack of the zone had room for the quorum ...
    assert max(room.values()) < gang.min_count, (
        f"gang {name} ({gang}) spread over racks {sorted(used)} of {zone} though a rack "
        f"had room for its quorum: {room}"
    )
    # ... and then over no more racks than the fewest that hold it.
    total, fewest = 0, 0
    for count in sorted(room.values(), reverse=True):
        total += count
        fewest += 1
        if total >= gang.min_count:
            break
    assert len(used) <= fewest, (
        f"gang {name} ({gang}) spread over {len(used)} racks of {zone}, {fewest} would "
        f"hold its quorum: {room}"
    )


async def scenario(racks: list[list[list[int]]], gangs: list[GangCfg]) -> None:
    named = {f"g{i}": g for i, g in enumerate(gangs)}
    async with SimCluster(node_specs(racks), bookmark_interval=0.5) as cluster:
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
                await settle(cluster, daemon)
                for wave in waves_of(named):
                    before = Snapshot.of(cluster)
                    for name in wave:
                        submit(cluster, name, named[name])
                    await settle(cluster, daemon)
                    after = Snapshot.of(cluster)
                    newly = {p.rsplit("-", 1)[0] for p in set(after.node_of) - set(before.node_of)}
                    if len(wave) == 1 and newly <= set(wave):
                        check_alone(wave[0], named[wave[0]], before, after)
                    elif len(wave) == 1:
                        event("alone, but another gang got nodes too: not checked")
                # Checked while the daemon still runs: stopping it must not be what
                # leaves a gang whole or partial.
                check(cluster, ledger, audit, named)
            finally:
                await daemon.stop(grace=1)


def check(
    cluster: SimCluster, ledger: PodLedger, audit: list[Any], gangs: dict[str, GangCfg]
) -> None:
    # (c)
    assert ledger.violations == []
    assert ledger.twice() == []
    accepted = accepted_bindings(audit)
    assert [k for k, n in accepted.items() if n > 1] == []
    assert sum(ledger.bound_count.values()) == sum(accepted.values())
    final = Snapshot.of(cluster)
    whole = 0
    for name, gang in gangs.items():
        placed = final.members(name)
        # (d)
        assert len(placed) == 0 or len(placed) >= gang.min_count, (
            f"gang {name} ({gang}) has {len(placed)} bound members"
        )
        whole += bool(placed)
        # (a)
        if gang.required:
            domains = {final.labels[n].get(gang.required, "") for n in placed.values()}
            assert len(domains) <= 1, (
                f"gang {name} ({gang}) straddles {gang.required} domains {sorted(domains)}"
            )
    event(f"gangs bound: {whole} of {len(gangs)}")


@settings(
    max_examples=20,
    deadline=None,
    # Each example runs a cluster and a daemon for seconds: shrinking a failure
    # would take many minutes, so a failing example is reported as generated.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(racks=racks_st, gangs=st.lists(gang_st, min_size=1, max_size=6))
def test_topology_gangs_through_the_api_server_keep_to_their_domains(
    racks: list[list[list[int]]], gangs: list[GangCfg]
) -> None:
    asyncio.run(scenario(racks, gangs))
