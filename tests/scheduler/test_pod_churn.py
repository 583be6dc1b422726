"""Pods that come and go: what the scheduler keeps of them once they are deleted.

Memory must be bounded by the live cluster, not by the pods that passed through it.
Each round creates pods (plain, spread and with pod (anti-)affinity, so the plugins
that count pods incrementally follow the NodeTable's change log), schedules and binds
them, and deletes them, half of them gracefully (terminating first). Afterwards no
deleted pod may still be alive: counted with weak references (or live ``Pod``
objects) after a full collection, never with timing. In process through the
scheduler harness, and over HTTP through the daemon, where informers, events and
the kube client see every pod too.

What the table keeps of a pod (its ``PodRecord``) is built once per PodInfo, so the
cache must build a new PodInfo when the pod changes in a way the record shows: a pod
that starts terminating stops counting for PodTopologySpread. And the daemon keeps
no list that grows with every attempt.
"""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from troupe.api.clock import FakeClock
from troupe.api.config import config_document, load_config
from troupe.api.objects import LabelSelector, Node, Pod
from troupe.api.podcounts import CountsCache, PodClause, PodMatcher
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.cache import Cache
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec

from tests.plugins.builders import make_node, make_pod
from tests.scheduler.harness import Harness

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
DELETED_AT = "2026-01-01T00:00:00Z"


def terminating(pod: Pod) -> Pod:
    meta = pod.metadata.model_copy(update={"deletion_timestamp": DELETED_AT})
    return pod.model_copy(update={"metadata": meta})


# --- in process --------------------------------------------------------------------


def node(i: int) -> Node:
    return (
        make_node()
        .name(f"n{i}")
        .label(ZONE, f"z{i % 3}")
        .label(HOST, f"n{i}")
        .capacity(cpu="64", memory="256Gi", pods=500)
        .obj()
    )


def round_pods(r: int, count: int) -> list[Pod]:
    """A third plain, a third spread over zones, a third with anti-affinity by zone
    to a label no pod carries (so every one fits) and a preferred affinity."""
    pods = []
    for i in range(count):
        b = (
            make_pod()
            .name(f"r{r}-p{i}")
            .uid(f"r{r}-u{i}")
            .label("app", f"web-{i % 5}")
            .req(cpu="100m", memory="64Mi")
            .scheduler_name("troupe-scheduler")
        )
        if i % 3 == 1:
            b = b.spread_constraint(1, ZONE, {"app": f"web-{i % 5}"}, when="ScheduleAnyway")
        elif i % 3 == 2:
            b = b.pod_anti_affinity(ZONE, {"app": "nobody"}).pod_affinity(
                HOST, {"app": "web-0"}, weight=10
            )
        pods.append(b.obj())
    return pods


def selector_round_pods(r: int, count: int) -> list[Pod]:
    """Pods in namespace ``team-a`` whose terms select namespaces by label: a required
    anti-affinity by zone to a label no pod carries, and a preferred affinity to the
    round's ``web-0`` pods, both in the namespaces labelled ``team=a``."""
    return [
        make_pod()
        .name(f"r{r}-p{i}")
        .uid(f"r{r}-u{i}")
        .namespace("team-a")
        .label("app", f"web-{i % 5}")
        .req(cpu="100m", memory="64Mi")
        .scheduler_name("troupe-scheduler")
        .pod_anti_affinity(ZONE, {"app": "nobody"}, namespace_selector={"team": "a"})
        .pod_affinity(HOST, {"app": "web-0"}, weight=10, namespace_selector={"team": "a"})
        .obj()
        for i in range(count)
    ]


async def churn(
    h: Harness,
    r: int,
    count: int,
    make: Callable[[int, int], list[Pod]] = round_pods,
    namespace: str = "default",
) -> list[weakref.ref[Pod]]:
    """One round: create, schedule, bind, delete. Weak references to every Pod
    object of the round: as created, as bound (the watch's copy), as terminating."""
    pods = make(r, count)
    seen = [weakref.ref(p) for p in pods]
    h.pods(pods)
    del pods
    await h.settle()
    cache = h.scheduler.cache
    gone = []
    for i in range(count):
        info = cache.info_of(f"{namespace}/r{r}-p{i}")
        assert info is not None and not cache.is_assumed(info.key), f"r{r}-p{i} is not bound"
        pod = info.pod
        if i % 2:
            ending = terminating(pod)
            h.handlers.on_pod_update(pod, ending)
            pod = ending
        gone.append(pod)
    del info, pod
    seen += [weakref.ref(p) for p in gone]
    await h.settle()
    for pod in gone:
        h.handlers.on_pod_delete(pod)
    del gone, pod
    await h.settle()
    assert cache.pod_count == 0
    return seen


def alive(refs: list[weakref.ref[Pod]]) -> int:
    gc.collect()
    return sum(1 for ref in refs if ref() is not None)


async def test_no_deleted_pod_stays_alive_after_rounds_of_churn() -> None:
    h = Harness().nodes(node(i) for i in range(6))
    gone: list[weakref.ref[Pod]] = []
    for r in range(4):
        gone += await churn(h, r, 90)
        left = alive(gone)
        assert left == 0, f"after round {r}: {left} deleted pods alive"
    await h.close()


async def test_pods_with_namespace_selectors_are_freed_and_their_records_stay_small() -> None:
    # The incoming pod's terms resolved against namespace labels are kept on its
    # PodInfo (freed with the pod); its record, which the change log keeps, holds
    # only the compiled terms, whatever the namespace labels did meanwhile.
    h = Harness().nodes(node(i) for i in range(6)).namespace("team-a", team="a")
    h.namespace("team-b", team="b")
    table = h.scheduler.cache.table
    seq = table.change_seq
    gone: list[weakref.ref[Pod]] = []
    for r in range(3):
        gone += await churn(h, r, 60, selector_round_pods, "team-a")
        left = alive(gone)
        assert left == 0, f"after round {r}: {left} deleted pods alive"
        h.namespace("team-b", team="a" if r % 2 == 0 else "b")  # the generation moves
    changes = table.changes_since(seq)
    # Every pod added and removed, a terminating one removed and added once more.
    assert changes is not None and len(changes) == 3 * (60 + 30 * 2 + 60)
    assert sum(sign for sign, _, _ in changes) == 0
    compiled = {tuple(record.affinity.compiled) for _, _, record in changes if record.affinity}
    # (A record the plugin has not read yet has nothing compiled.)
    assert ("InterPodAffinity",) in compiled and compiled <= {(), ("InterPodAffinity",)}
    await h.close()


# --- through the daemon, over HTTP -------------------------------------------------

PER_ROUND = 30


def pod_object(name: str, r: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"round": str(r)}},
        "spec": {
            "schedulerName": "troupe-scheduler",
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }


async def eventually(done: Callable[[], bool], what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.02)


def alive_named(prefix: str) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Pod and o.metadata.name.startswith(prefix))


async def test_the_daemon_frees_deleted_pods_end_to_end(tmp_path: Path) -> None:
    async with SimCluster([NodeSpec(count=3, cpu="8", memory="32Gi")]) as cluster:
        config = load_config(config_document(), catalog(default_registry()))
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        daemon = SchedulerDaemon(config, Connection(kubeconfig=str(kubeconfig)), sync_timeout=10)
        await daemon.start()
        scheduler, informers = daemon.scheduler, daemon.informers
        assert scheduler is not None and informers is not None
        cache, store = scheduler.cache, cluster.store

        def bound(names: list[str]) -> bool:
            return all(store.get("pods", n, "default")["spec"].get("nodeName") for n in names)

        try:
            for r in range(2):
                names = [f"churn-{r}-{i}" for i in range(PER_ROUND)]
                for name in names:
                    store.create("pods", pod_object(name, r))
                await eventually(lambda: bound(names), f"round {r} is bound")  # noqa: B023
                for name in names:
                    # Graceful: the pod is updated to terminating, then removed.
                    store.delete("pods", name, "default", grace_period_seconds=1)
                await eventually(
                    lambda: not cache.pod_count and not informers.pods.store, f"round {r} is gone"
                )
                # The informer may still be iterating over the batch of watch events
                # that carried the deletions (the batch holds its pods until it ends):
                # freed soon after, never kept.
                await eventually(lambda: alive_named("churn-") == 0, f"round {r}'s pods are freed")
        finally:
            await daemon.stop(grace=1)


# --- what the table keeps of a pod stays true to it --------------------------------

SPREAD_WEB = PodMatcher(
    (PodClause.of(frozenset({"default"}), LabelSelector(match_labels={"app": "web"})),),
    skip_terminating=True,
)


def recount(cache: Cache, matcher: PodMatcher) -> list[int]:
    pods = cache.table.pods
    return [sum(1 for p in pods[s].values() if matcher.matches(p.record)) for s in range(len(pods))]


def test_a_pod_that_starts_terminating_stops_counting_for_spreading() -> None:
    cache = Cache(FakeClock())
    cache.add_node(make_node().name("n1").capacity(cpu="4", pods=10).obj())
    counts = CountsCache()
    running = make_pod().name("w").label("app", "web").node("n1").obj()
    cache.add_pod(running)
    assert counts.counts(cache.table, SPREAD_WEB).tolist() == recount(cache, SPREAD_WEB)
    assert recount(cache, SPREAD_WEB)[cache.table.index["n1"]] == 1
    ending = terminating(running)
    cache.update_pod(running, ending)
    assert counts.counts(cache.table, SPREAD_WEB).tolist() == recount(cache, SPREAD_WEB)
    assert recount(cache, SPREAD_WEB)[cache.table.index["n1"]] == 0
    cache.remove_pod(ending)
    assert counts.counts(cache.table, SPREAD_WEB).tolist() == recount(cache, SPREAD_WEB)


def test_a_binding_confirmed_for_a_terminating_pod_accounts_it_as_terminating() -> None:
    cache = Cache(FakeClock())
    cache.add_node(make_node().name("n1").capacity(cpu="4", pods=10).obj())
    cache.assume(make_pod().name("w").label("app", "web").info(), "n1")
    bound = make_pod().name("w").label("app", "web").node("n1").terminating().obj()
    cache.add_pod(bound)
    info = cache.info_of("default/w")
    assert info is not None and info.pod is bound and info.record.terminating
    assert recount(cache, SPREAD_WEB) == [0] * len(cache.table.pods)


# --- attempt statistics ------------------------------------------------------------


def test_the_daemon_counts_attempts_but_keeps_no_latency_per_attempt() -> None:
    # Lists of latencies would grow with every pod the daemon ever schedules.
    config = load_config(config_document(), catalog(default_registry()))
    stats = SchedulerDaemon(config, Connection(kubeconfig="unused")).stats
    for _ in range(100):
        stats.attempt("scheduled", "troupe-scheduler", 0.01)
        stats.cycle(0.005)
        stats.group_attempt("scheduled", "troupe-scheduler", 0.02)
    assert stats.results["scheduled"] == 100 and stats.group_results["scheduled"] == 100
    assert stats.attempt_seconds == stats.cycle_seconds == stats.group_attempt_seconds == []
