"""Invariants of gang scheduling over generated clusters and gang sets.

After the system settles: every gang has 0 or >= minCount members bound; no node's
capacity is exceeded; no pod is bound twice (the recording client fails the test on
a second binding). A node removed mid-run (its pods deleted, as the pod garbage
collector would) must not make troupe bind part of a gang afterwards.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from troupe.api.gangs import GangApi
from troupe.api.objects import Node

from tests.plugins.builders import make_node
from tests.scheduler.gang_helpers import coscheduling_group, member
from tests.scheduler.harness import Harness


@dataclass(frozen=True)
class Gang:
    name: str
    size: int
    min_count: int
    cpu: int
    tolerates: bool = False


TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


gangs_strategy = st.lists(
    st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 2), st.booleans()).map(
        lambda t: (t[0], min(t[0], t[1]), t[2], t[3])
    ),
    min_size=1,
    max_size=5,
)


async def run(
    node_cpus: list[int], gangs: list[Gang], remove: int | None, tainted: list[bool]
) -> None:
    def node(i: int, c: int) -> Node:
        b = make_node().name(f"n{i}").capacity(cpu=str(c), memory="8Gi", pods=110)
        if tainted[i % len(tainted)]:
            b = b.taint("dedicated", "gpu", "NoSchedule")
        return b.obj()

    h = Harness().nodes(node(i, c) for i, c in enumerate(node_cpus))
    for g in gangs:
        h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group(g.name, g.min_count))
        extra = {"tolerations": [TOLERATION]} if g.tolerates else {}
        h.pods(member(g.name, i, cpu=str(g.cpu), **extra) for i in range(g.size))
    await h.settle()
    check(h, node_cpus, gangs, removed=set())
    removed: set[str] = set()
    if remove is not None and node_cpus:
        name = f"n{remove % len(node_cpus)}"
        removed.add(name)
        node = make_node().name(name).capacity(cpu=str(node_cpus[remove % len(node_cpus)])).obj()
        for key, where in list(h.client.bindings):
            if where == name:
                g, i = key.split("/")[1].rsplit("-", 1)
                gang = next(x for x in gangs if x.name == g)
                extra = {"tolerations": [TOLERATION]} if gang.tolerates else {}
                pod = member(g, int(i), cpu=str(gang.cpu), **extra)
                pod.spec.node_name = name
                h.handlers.on_pod_delete(pod)
        h.handlers.on_node_delete(node)
    for _ in range(3):
        await h.advance(15)
        await h.settle()
    check(h, node_cpus, gangs, removed)
    await h.close()


def check(h: Harness, node_cpus: list[int], gangs: list[Gang], removed: set[str]) -> None:
    used: dict[str, int] = {}
    per_gang: dict[str, int] = {}
    for key, node in h.client.bindings:
        g, _ = key.split("/")[1].rsplit("-", 1)
        gang = next(x for x in gangs if x.name == g)
        used[node] = used.get(node, 0) + gang.cpu
        if node not in removed:
            per_gang[g] = per_gang.get(g, 0) + 1
    for i, cpu in enumerate(node_cpus):
        assert used.get(f"n{i}", 0) <= cpu, f"node n{i} over capacity"
    for g in gangs:
        lost = any(
            node in removed
            for key, node in h.client.bindings
            if key.split("/")[1].rsplit("-", 1)[0] == g.name
        )
        n = per_gang.get(g.name, 0)
        if not lost:
            assert n == 0 or n >= g.min_count, f"gang {g} partly bound: {n}"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    node_cpus=st.lists(st.integers(1, 4), min_size=1, max_size=6),
    gangs=gangs_strategy,
    remove=st.one_of(st.none(), st.integers(0, 10)),
    tainted=st.lists(st.booleans(), min_size=1, max_size=6),
)
def test_no_gang_is_ever_partly_bound(
    node_cpus: list[int],
    gangs: list[tuple[int, int, int, bool]],
    remove: int | None,
    tainted: list[bool],
) -> None:
    gang_objs = [Gang(f"g{i}", size, mc, cpu, tol) for i, (size, mc, cpu, tol) in enumerate(gangs)]
    asyncio.run(run(node_cpus, gang_objs, remove, tainted))
