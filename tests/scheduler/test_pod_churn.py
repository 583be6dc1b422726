"""Pods that come and go: what the scheduler keeps of them once they are deleted.

Memory must be bounded by the live cluster, not by the pods that passed through it.
Each round creates pods (plain, spread and with pod (anti-)affinity, so the plugins
that count pods incrementally follow the NodeTable's change log), schedules and binds
them, and deletes them as the watch would. Afterwards no deleted pod may still be
alive: counted with weak references after a full collection, never with timing.
"""

from __future__ import annotations

import gc
import weakref

from troupe.api.objects import Node, Pod

from tests.plugins.builders import make_node, make_pod
from tests.scheduler.harness import Harness

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


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


async def churn(h: Harness, r: int, count: int) -> list[weakref.ref[Pod]]:
    """One round: create, schedule, bind, delete. Weak references to every Pod
    object of the round: as created, and as bound (the watch's copy)."""
    pods = round_pods(r, count)
    seen = [weakref.ref(p) for p in pods]
    h.pods(pods)
    del pods
    await h.settle()
    cache = h.scheduler.cache
    bound = []
    for i in range(count):
        info = cache.info_of(f"default/r{r}-p{i}")
        assert info is not None, f"r{r}-p{i} was not bound"
        bound.append(info.pod)
    seen += [weakref.ref(p) for p in bound]
    for pod in bound:
        h.handlers.on_pod_delete(pod)
    del bound, info
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
        assert alive(gone) == 0, f"after round {r}: {alive(gone)} deleted pods alive"
    await h.close()
