"""Workload-aware preemption invariants end to end (KEP-5710): generated clusters
filled with low-priority workloads, then high-priority gangs, through the embedded
API server.

A cluster is 2-6 nodes of 2-8 cpu, sometimes with rack labels (``troupe.dev/rack``,
nodes dealt round-robin over 2-3 racks). It is filled with low-priority workloads
(PriorityClasses ``lowest`` and ``low``): single pods and v1beta1 PodGroup gangs of
1-4 cpu-only members, some with ``disruptionMode: {all: {}}`` (evicted or spared
as a whole), some in the default single mode. Low pods left pending are deleted, and
sometimes the room left on each node is topped up with 500m singles bound there, so
the cluster is full. Then high-priority gangs (v1beta1 PodGroups and members of
class ``high``) of 1-6 members come one at a time, sometimes constrained to one rack
(``spec.schedulingConstraints.topology``), sometimes too big to fit even with every
low pod gone. After each the test waits until the scheduler is idle and no pod is
terminating, and checks, from what the server committed:

(a) a gang submitted alone (nothing else created meanwhile) that made the scheduler
    evict anything (pods deleted with ``DisruptionTarget``/``PreemptionByScheduler``)
    ends up bound (at least minCount members);
(b) no ``all`` group is ever partly evicted: of each, the members deleted by
    preemption are none or all of its bound members;
(c) no victim was chosen that the final placement did not need: once the gang has
    every member bound, each victim unit (a pod, or an ``all`` group whole), put back
    where it ran, overcommits the cpu of at least one of its nodes beside the pods
    bound now;
(d) no pod is bound twice, no nodeName changes, no node's capacity is exceeded, and
    a rack-constrained gang lands in one rack.

Follows ``test_topology_invariants_e2e.py`` (settling check, settings). A wave that
does not settle (a gang retried forever) is still checked, then fails.

The fixed-cluster tests at the end are what the generated ones found, kept as
regressions: a gang must bind on the nodes its preemption nominated (not on room an
``all`` victim freed elsewhere, which would make the singles evicted on its nominated
node unneeded), and a rack-constrained gang must not count its own members'
nominations as taken once its victims are gone (it preempted a second rack, or never
bound). A gang is held to its nominated nodes while its victims terminate (one on a
node whose kubelet is down), and binds in the rack it preempted in even when another
rack, freed by its ``all`` victims, scores better once they are gone.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from troupe.api.config import config_document, load_config
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.kubelet import KUBELET_ANNOTATION, NO_KUBELET
from troupe.sim.nodespec import RACK_LABEL, NodeSpec

from tests.integration.gang_audit import PodLedger, accepted_bindings, pod_requests
from tests.integration.test_gang_invariants_e2e import fingerprint
from tests.integration.test_preemption import condition, priority_classes

PODGROUPS = "podgroups.scheduling.k8s.io"
# Backoff of 1 s (instead of up to 10) keeps each example short.
CONFIG = config_document(podInitialBackoffSeconds=1, podMaxBackoffSeconds=1)
TOP_UP_M = 500


@dataclass(frozen=True)
class LowCfg:
    size: int  # 0: a single pod (no group)
    min_count: int
    cpu_m: int
    all_mode: bool  # disruptionMode {all: {}} (else the default, single)
    cls: str  # "lowest" or "low"


@dataclass(frozen=True)
class HighCfg:
    size: int
    min_count: int
    cpu_m: int
    rack: bool  # spec.schedulingConstraints.topology: [{key: troupe.dev/rack}]


low_st = st.integers(0, 4).flatmap(
    lambda size: st.builds(
        LowCfg,
        size=st.just(size),
        min_count=st.integers(1, max(size, 1)),
        cpu_m=st.sampled_from([500, 1000, 1500, 2000]),
        all_mode=st.booleans(),
        cls=st.sampled_from(["lowest", "low"]),
    )
)
high_st = st.integers(1, 6).flatmap(
    lambda size: st.builds(
        HighCfg,
        size=st.just(size),
        # Often every member: the whole gang needs room.
        min_count=st.one_of(st.just(size), st.integers(1, size)),
        cpu_m=st.sampled_from([1000, 2000, 3000, 4000]),
        rack=st.booleans(),
    )
)


def node_specs(cpus: list[int], racks: int) -> list[NodeSpec]:
    return [
        NodeSpec(
            count=1,
            cpu=str(cpu),
            memory="64Gi",
            racks=0,
            labels={RACK_LABEL: f"r{i % racks}"} if racks else {},
            name_prefix=f"n{i}",
        )
        for i, cpu in enumerate(cpus)
    ]


def pod_obj(
    name: str, cpu_m: int, cls: str, group: str = "", node: str = "", grace: int | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "troupe-scheduler",
        "priorityClassName": cls,
        "containers": [
            {"name": "c", "image": "pause", "resources": {"requests": {"cpu": f"{cpu_m}m"}}}
        ],
    }
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if node:
        spec["nodeName"] = node
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def group_obj(name: str, min_count: int, cls: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": min_count}},
            "priorityClassName": cls,
            **spec,
        },
    }


def submit_low(cluster: SimCluster, name: str, low: LowCfg) -> None:
    if low.size == 0:
        cluster.store.create("pods", pod_obj(name, low.cpu_m, low.cls))
        return
    extra = {"disruptionMode": {"all": {}}} if low.all_mode else {}
    cluster.store.create(PODGROUPS, group_obj(name, low.min_count, low.cls, **extra))
    for i in range(low.size):
        cluster.store.create("pods", pod_obj(f"{name}-{i}", low.cpu_m, low.cls, name))


def submit_high(cluster: SimCluster, name: str, high: HighCfg) -> None:
    extra = {"schedulingConstraints": {"topology": [{"key": RACK_LABEL}]}} if high.rack else {}
    cluster.store.create(PODGROUPS, group_obj(name, high.min_count, "high", **extra))
    for i in range(high.size):
        cluster.store.create("pods", pod_obj(f"{name}-{i}", high.cpu_m, "high", name))


class Evictions:
    """Every pod the store deletes, with whether the scheduler preempted it."""

    def __init__(self, cluster: SimCluster) -> None:
        self.deleted: dict[str, dict[str, Any]] = {}  # pod name -> last object
        self.stop = cluster.store.listen("pods", self._on)

    def _on(self, type_: str, obj: dict[str, Any]) -> None:
        if type_ == "DELETED":
            self.deleted[obj["metadata"]["name"]] = obj

    def preempted(self) -> dict[str, dict[str, Any]]:
        out = {}
        for name, obj in self.deleted.items():
            found = condition(obj, "DisruptionTarget")
            if found is not None and found.get("reason") == "PreemptionByScheduler":
                out[name] = obj
        return out


@dataclass
class Snapshot:
    """What the server has: each node's allocatable millicores and rack, and every
    bound pod's node and millicores."""

    allocatable: dict[str, int]
    rack: dict[str, str]
    bound: dict[str, tuple[str, int]]  # pod name -> (node, millicores)

    @classmethod
    def of(cls, cluster: SimCluster) -> Snapshot:
        allocatable, rack = {}, {}
        for node in cluster.store.list("nodes"):
            name = node["metadata"]["name"]
            allocatable[name] = int(node["status"]["allocatable"]["cpu"]) * 1000
            rack[name] = node["metadata"]["labels"].get(RACK_LABEL, "")
        bound = {}
        for pod in cluster.store.list("pods", namespace="default"):
            if node := pod["spec"].get("nodeName"):
                bound[pod["metadata"]["name"]] = (node, pod_requests(pod)["cpu"])
        return cls(allocatable, rack, bound)

    def used(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for node, cpu in self.bound.values():
            out[node] += cpu
        return out

    def members(self, group: str) -> dict[str, str]:
        return {p: n for p, (n, _) in self.bound.items() if p.rsplit("-", 1)[0] == group}


async def settle(cluster: SimCluster, daemon: SchedulerDaemon, timeout: float = 20.0) -> bool:
    """Until the scheduler is idle, no pod is terminating, and the cluster is
    unchanged for 0.4 s (True), or ``timeout`` seconds (False: a gang that keeps
    being retried never lets the scheduler idle)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: tuple[Any, ...] | None = None
    stable_since = loop.time()
    while True:
        now = fingerprint(cluster, daemon)
        if now is not None and any(
            p["metadata"].get("deletionTimestamp")
            for p in cluster.store.list("pods", namespace="default")
        ):
            now = None
        if now is None or now != last:
            last, stable_since = now, loop.time()
        elif loop.time() - stable_since > 0.4:
            return True
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.02)


async def fill(
    cluster: SimCluster, daemon: SchedulerDaemon, lows: dict[str, LowCfg], top_up: bool
) -> None:
    """The low workloads, bound (pending ones deleted), the room left topped up."""
    for name, low in lows.items():
        submit_low(cluster, name, low)
    assert await settle(cluster, daemon), "the low workloads did not settle"
    for pod in cluster.store.list("pods", namespace="default"):
        if not pod["spec"].get("nodeName"):
            cluster.store.delete("pods", pod["metadata"]["name"], "default", grace_period_seconds=0)
    if top_up:
        snap = Snapshot.of(cluster)
        used = snap.used()
        for node, alloc in snap.allocatable.items():
            for i in range((alloc - used[node]) // TOP_UP_M):
                cluster.store.create(
                    "pods", pod_obj(f"top-{node}-{i}", TOP_UP_M, "lowest", "", node)
                )
    assert await settle(cluster, daemon), "the top-up pods did not settle"


def unit_of(name: str, lows: dict[str, LowCfg]) -> str:
    """The victim unit a low pod is evicted in: its ``all`` group, else itself."""
    group = name.rsplit("-", 1)[0]
    low = lows.get(group)
    if low is not None and low.size and low.all_mode:
        return group
    return name


def check_wave(
    name: str,
    high: HighCfg,
    lows: dict[str, LowCfg],
    before: Snapshot,
    after: Snapshot,
    evicted: dict[str, dict[str, Any]],
) -> None:
    placed = after.members(name)
    # (d): one rack.
    if high.rack and placed:
        racks = {after.rack[n] for n in placed.values()}
        assert len(racks) == 1, f"gang {name} ({high}) straddles racks {sorted(racks)}"
    # Nothing else is created meanwhile: every binding of the wave is the gang's (or
    # a member beyond the quorum of an earlier gang, taking room left over).
    others = {p for p in set(after.bound) - set(before.bound) if not p.startswith("h")}
    assert not others, f"pods other than {name}'s bound during its wave: {sorted(others)}"
    if not evicted:
        event("wave: nothing evicted, " + ("bound" if placed else "pending"))
        return
    # (a): the gang, alone in its wave, evicted: it binds.
    assert len(placed) >= high.min_count, (
        f"gang {name} ({high}) evicted {sorted(evicted)} and has only {len(placed)} "
        f"of {high.min_count} members bound"
    )
    event(f"wave: evicted {min(len(evicted), 5)}{'+' if len(evicted) > 5 else ''}, bound")
    if len(placed) < high.size:
        return
    check_needed(name, units_of(evicted, before, lambda v: unit_of(v, lows)), after)


def units_of(
    evicted: Iterable[str], before: Snapshot, unit: Callable[[str], str]
) -> dict[str, Counter[str]]:
    """Victim unit -> node -> millicores of its evicted pods there, as they ran."""
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for victim in evicted:
        node, cpu = before.bound[victim]
        out[unit(victim)][node] += cpu
    return out


def check_needed(name: str, units: dict[str, Counter[str]], after: Snapshot) -> None:
    """(c): each victim unit, put back where it ran, breaks the final placement."""
    used = after.used()
    for unit, on in units.items():
        assert any(after.allocatable[n] < used[n] + cpu for n, cpu in on.items()), (
            f"victim {unit} ({dict(on)} millicores) of gang {name} was not needed: "
            f"allocatable {after.allocatable}, used now {dict(used)}, "
            f"gang at {after.members(name)}"
        )


def check(
    cluster: SimCluster,
    ledger: PodLedger,
    audit: list[Any],
    lows: dict[str, LowCfg],
    filled: Snapshot,
    evictions: Evictions,
) -> None:
    # (d)
    assert ledger.violations == []
    assert ledger.twice() == []
    accepted = accepted_bindings(audit)
    assert [k for k, n in accepted.items() if n > 1] == []
    # Every binding the store committed (but the top-up pods', created bound) was one
    # the server accepted.
    scheduled = {u: n for u, n in ledger.bound_count.items() if "/top-" not in ledger.names[u]}
    assert sum(scheduled.values()) == sum(accepted.values())
    # Only preemption deletes low pods once the cluster is filled.
    preempted = evictions.preempted()
    assert set(evictions.deleted) == set(preempted), (
        f"deleted but not preempted: {sorted(set(evictions.deleted) - set(preempted))}"
    )
    # (b)
    for group, low in lows.items():
        if not (low.size and low.all_mode):
            continue
        bound = set(filled.members(group))
        gone = {p for p in preempted if p.rsplit("-", 1)[0] == group}
        assert gone in (set(), bound), (
            f"all group {group} ({low}) partly evicted: {sorted(gone)} of {sorted(bound)}"
        )
        if bound:
            event("all group: " + ("evicted whole" if gone else "spared"))


@asynccontextmanager
async def running_daemon(cluster: SimCluster) -> AsyncIterator[SchedulerDaemon]:
    resolved = load_config(CONFIG, catalog(default_registry()))
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = cluster.write_kubeconfig(Path(tmp) / "kubeconfig")
        daemon = SchedulerDaemon(
            resolved, Connection(kubeconfig=str(kubeconfig)), seed=1, sync_timeout=10
        )
        await daemon.start()
        try:
            yield daemon
        finally:
            await daemon.stop(grace=1)


async def scenario(
    cpus: list[int], racks: int, lows: list[LowCfg], top_up: bool, highs: list[HighCfg]
) -> None:
    low_named = {f"l{i}": low for i, low in enumerate(lows)}
    async with SimCluster(node_specs(cpus, racks), bookmark_interval=0.5) as cluster:
        priority_classes(cluster)
        audit = cluster.server.start_audit()
        ledger = PodLedger(cluster)
        async with running_daemon(cluster) as daemon:
            await fill(cluster, daemon, low_named, top_up)
            filled = Snapshot.of(cluster)
            evictions = Evictions(cluster)
            for i, high in enumerate(highs):
                name = f"h{i}"
                before = Snapshot.of(cluster)
                seen = set(evictions.preempted())
                submit_high(cluster, name, high)
                settled = await settle(cluster, daemon)
                after = Snapshot.of(cluster)
                evicted = {k: v for k, v in evictions.preempted().items() if k not in seen}
                # Checked even when not settled: what keeps the scheduler busy may be
                # a gang that evicted and cannot bind.
                check_wave(name, high, low_named, before, after, evicted)
                assert settled, f"the scheduler did not settle after gang {name}"
            # Checked while the daemon still runs.
            check(cluster, ledger, audit, low_named, filled, evictions)


@settings(
    max_examples=8,
    deadline=None,
    # Each example runs a cluster and a daemon for seconds: shrinking a failure
    # would take many minutes, so a failing example is reported as generated.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    cpus=st.lists(st.integers(2, 8), min_size=2, max_size=6),
    racks=st.sampled_from([0, 2, 3]),
    lows=st.lists(low_st, min_size=1, max_size=8),
    # Mostly full: preemption is then needed.
    top_up=st.sampled_from([True, True, False]),
    highs=st.lists(high_st, min_size=1, max_size=2),
)
def test_workload_preemption_evicts_only_what_the_gang_needs(
    cpus: list[int], racks: int, lows: list[LowCfg], top_up: bool, highs: list[HighCfg]
) -> None:
    asyncio.run(scenario(cpus, racks, lows, top_up, highs))


# Found by the test above, reduced to fixed clusters whose low pods are created bound.


async def one_gang(
    cpus: list[int],
    racks: int,
    groups: dict[str, tuple[bool, int, list[str]]],
    singles: dict[str, int],
    high: HighCfg,
    keep: dict[str, int] | None = None,
    timeout: float = 20.0,
    no_kubelet: str = "",
    grace: int | None = None,
    classes: dict[str, str] | None = None,
) -> tuple[bool, Snapshot, Snapshot, dict[str, dict[str, Any]]]:
    """A cluster of ``cpus`` whose low pods are bound from the start (``groups``:
    name -> (all mode, millicores, node of each member), class ``lowest`` unless
    ``classes`` names another;
    ``singles``: node -> 500m ``lowest`` pods there, with ``grace`` seconds of
    termination grace; ``keep``: node -> millicores of one ``low`` pod there, above
    the cheapest victims; ``no_kubelet``: a node whose kubelet is down, so that its
    pods' deletes are finished by the server once their grace is over), then the gang
    ``h0``: (settled within ``timeout``, before, after, evicted)."""
    async with SimCluster(node_specs(cpus, racks), bookmark_interval=0.5) as cluster:
        priority_classes(cluster)
        if no_kubelet:
            node = cluster.store.get("nodes", no_kubelet)
            node["metadata"]["annotations"] = {KUBELET_ANNOTATION: NO_KUBELET}
            cluster.store.update("nodes", node)
        for group, (all_mode, cpu_m, nodes) in groups.items():
            extra = {"disruptionMode": {"all": {}}} if all_mode else {}
            cls = (classes or {}).get(group, "lowest")
            cluster.store.create(PODGROUPS, group_obj(group, len(nodes), cls, **extra))
            for i, node in enumerate(nodes):
                cluster.store.create("pods", pod_obj(f"{group}-{i}", cpu_m, cls, group, node))
        for node, count in singles.items():
            for i in range(count):
                cluster.store.create(
                    "pods", pod_obj(f"top-{node}-{i}", TOP_UP_M, "lowest", "", node, grace)
                )
        for node, cpu_m in (keep or {}).items():
            cluster.store.create("pods", pod_obj(f"keep-{node}", cpu_m, "low", "", node))
        async with running_daemon(cluster) as daemon:
            assert await settle(cluster, daemon)
            evictions = Evictions(cluster)
            before = Snapshot.of(cluster)
            submit_high(cluster, "h0", high)
            settled = await settle(cluster, daemon, timeout)
            return settled, before, Snapshot.of(cluster), evictions.preempted()


async def whole_group_victim_frees_more(**options: Any) -> Snapshot:
    """n0 (4 cpu): a `low` pod of 1 cpu and g-0; n1 (4 cpu): g-1; n2 (4 cpu): 8
    singles. The gang (2 x 2 cpu) is nominated to n1 and n2: g (2 x 3 cpu) goes whole
    for n1, 4 singles for n2, and g's going frees n0 too. Checks that the gang bound
    and needed every victim; returns the cluster after (``options``: for
    ``one_gang``)."""
    settled, before, after, evicted = await one_gang(
        [4, 4, 4],
        0,
        {"g": (True, 3000, ["n0-0", "n1-0"])},
        {"n2-0": 8},
        HighCfg(size=2, min_count=2, cpu_m=2000, rack=False),
        keep={"n0-0": 1000},
        **options,
    )
    assert settled and len(after.members("h0")) == 2
    unit = lambda v: "g" if v.startswith("g-") else v  # noqa: E731
    check_needed("h0", units_of(evicted, before, unit), after)
    return after


async def test_room_freed_by_a_whole_group_victim_is_not_paid_for_twice() -> None:
    # The gang must not bind to n1 and n0: the singles of n2 would not have been
    # needed (evicting g alone would have done).
    await whole_group_victim_frees_more()


async def test_a_gang_waits_for_its_victims_rather_than_take_room_freed_elsewhere() -> None:
    # n2's kubelet is down: its singles stay terminating for their 3 s of grace,
    # while g's pods on n0 and n1 are gone at once. The gang is held to n1 and n2,
    # where its preemption nominated it, until the singles are gone.
    after = await whole_group_victim_frees_more(no_kubelet="n2-0", grace=3)
    assert sorted(after.members("h0").values()) == ["n1-0", "n2-0"]


async def test_a_rack_gang_binds_in_the_rack_it_preempted_in() -> None:
    # Racks r0 = n0, n3; r1 = n1, n4; r2 = n2; every node full. A gang of 5 x 1 cpu in
    # one rack is nominated to r1 (n4: 3, n1: 2), evicting l0 whole, l1 whole and
    # on n1 l2-1 and two singles. l0's and l1's going frees r0 as much: once every
    # victim is gone the topology score would prefer r0, leaving l2-1 and the
    # singles on n1 evicted for nothing. The gang binds in r1.
    settled, before, after, evicted = await one_gang(
        [3, 2, 2, 5, 4],
        3,
        {
            "l0": (True, 2000, ["n4-0", "n0-0", "n3-0"]),
            "l1": (True, 2000, ["n3-0", "n4-0"]),
            "l2": (False, 1000, ["n0-0", "n1-0", "n2-0", "n3-0"]),
        },
        {"n1-0": 2, "n2-0": 2},
        HighCfg(size=5, min_count=5, cpu_m=1000, rack=True),
        classes={"l1": "low", "l2": "low"},
    )
    assert settled and len(after.members("h0")) == 5
    unit = lambda v: v.rsplit("-", 1)[0] if v[:2] in ("l0", "l1") else v  # noqa: E731
    check_needed("h0", units_of(evicted, before, unit), after)


async def test_a_rack_gang_preempts_once() -> None:
    # Racks r0 = n0, n2 and r1 = n1, n3, 2 cpu each, full of 500m singles. A gang of
    # 2 x 2 cpu in one rack needs one rack emptied: 8 singles. It empties r0, then r1.
    settled, _, after, evicted = await one_gang(
        [2, 2, 2, 2],
        2,
        {},
        {f"n{i}-0": 4 for i in range(4)},
        HighCfg(size=2, min_count=2, cpu_m=2000, rack=True),
    )
    assert settled and len(after.members("h0")) == 2
    assert len(evicted) == 8, sorted(evicted)


async def test_a_rack_gang_that_evicted_binds() -> None:
    # One rack of two 2-cpu nodes full of 500m singles; a gang of 2 x 2 cpu in one rack
    # evicts all 8, then finds no room (nothing left to evict) and stays pending.
    _, _, after, evicted = await one_gang(
        [2, 2],
        1,
        {},
        {"n0-0": 4, "n1-0": 4},
        HighCfg(size=2, min_count=2, cpu_m=2000, rack=True),
        timeout=6,
    )
    assert len(evicted) == 8, sorted(evicted)
    assert len(after.members("h0")) == 2, "the gang evicted 8 pods and did not bind"
