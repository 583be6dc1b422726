"""Invariants of CompositePodGroup scheduling over generated clusters and trees (KEP-6012).

Each composite is a gang of 1-3 leaf PodGroups (minGroupCount 1..leaves), some nested
one level under another composite. After the system settles: every leaf has 0 or at
least its own minCount members bound; every gang composite has 0 or at least
minGroupCount children at their quorum; no node's capacity is exceeded; no pod is bound
twice (the recording client fails the test on a second binding).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from troupe.api.gangapi import CompositePodGroup, V1beta1PodGroup
from troupe.api.gangs import GangApi

from tests.plugins.builders import make_node
from tests.scheduler.gang_helpers import member
from tests.scheduler.harness import Harness


@dataclass(frozen=True)
class Leaf:
    name: str
    size: int
    min_count: int
    cpu: int


@dataclass(frozen=True)
class Composite:
    name: str
    leaves: tuple[Leaf, ...]
    min_group_count: int
    # Nested under a root composite of its own (minGroupCount 1), two levels deep.
    nested: bool


def composite(name: str, min_group_count: int, parent: str | None = None) -> CompositePodGroup:
    spec: dict[str, object] = {
        "workloadRef": {"workloadName": "job", "templateName": name},
        "schedulingPolicy": {"gang": {"minGroupCount": min_group_count}},
    }
    if parent is not None:
        spec["parentCompositePodGroupName"] = parent
    return CompositePodGroup.model_validate(
        {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}
    )


def leaf_group(leaf: Leaf, parent: str) -> V1beta1PodGroup:
    return V1beta1PodGroup.model_validate(
        {
            "metadata": {"name": leaf.name, "namespace": "default", "uid": f"uid-{leaf.name}"},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": leaf.min_count}},
                "parentCompositePodGroupName": parent,
            },
        }
    )


leaf_shape = st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 2)).map(
    lambda t: (t[0], min(t[0], t[1]), t[2])
)
composites_strategy = st.lists(
    st.tuples(st.lists(leaf_shape, min_size=1, max_size=3), st.integers(1, 3), st.booleans()),
    min_size=1,
    max_size=3,
)


def build(shapes: list[tuple[list[tuple[int, int, int]], int, bool]]) -> list[Composite]:
    out = []
    for c, (leaves, mgc, nested) in enumerate(shapes):
        built = tuple(Leaf(f"c{c}l{i}", s, m, cpu) for i, (s, m, cpu) in enumerate(leaves))
        out.append(Composite(f"c{c}", built, min(mgc, len(built)), nested))
    return out


async def run(node_cpus: list[int], composites: list[Composite]) -> dict[str, int]:
    """Settle the cluster; how many members of each leaf are bound."""
    h = Harness().nodes(
        make_node().name(f"n{i}").capacity(cpu=str(c), memory="8Gi", pods=110).obj()
        for i, c in enumerate(node_cpus)
    )
    for c in composites:
        if c.nested:
            h.handlers.on_group_add(GangApi.POD_GROUP, composite(f"{c.name}root", 1))
        parent = f"{c.name}root" if c.nested else None
        h.handlers.on_group_add(GangApi.POD_GROUP, composite(c.name, c.min_group_count, parent))
        for leaf in c.leaves:
            h.handlers.on_group_add(GangApi.POD_GROUP, leaf_group(leaf, c.name))
            h.pods(
                member(leaf.name, i, cpu=str(leaf.cpu), api="pod_group") for i in range(leaf.size)
            )
    await h.settle()
    for _ in range(2):
        await h.advance(15)
        await h.settle()
    per_leaf = check(h, node_cpus, composites)
    await h.close()
    return per_leaf


def check(h: Harness, node_cpus: list[int], composites: list[Composite]) -> dict[str, int]:
    leaves = {leaf.name: leaf for c in composites for leaf in c.leaves}
    used: dict[str, int] = {}
    per_leaf: dict[str, int] = {}
    for key, node in h.client.bindings:
        name = key.split("/")[1].rsplit("-", 1)[0]
        used[node] = used.get(node, 0) + leaves[name].cpu
        per_leaf[name] = per_leaf.get(name, 0) + 1
    for i, cpu in enumerate(node_cpus):
        assert used.get(f"n{i}", 0) <= cpu, f"node n{i} over capacity"
    for c in composites:
        at_quorum = 0
        for leaf in c.leaves:
            n = per_leaf.get(leaf.name, 0)
            assert n == 0 or n >= leaf.min_count, f"leaf {leaf} of {c.name} partly bound: {n}"
            at_quorum += n >= leaf.min_count
        assert at_quorum == 0 or at_quorum >= c.min_group_count, (
            f"composite {c} partly bound: {at_quorum} groups at quorum"
        )
    return per_leaf


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_cpus=st.lists(st.integers(1, 4), min_size=1, max_size=5), shapes=composites_strategy)
def test_no_composite_is_ever_partly_bound(
    node_cpus: list[int], shapes: list[tuple[list[tuple[int, int, int]], int, bool]]
) -> None:
    asyncio.run(run(node_cpus, build(shapes)))


def test_role_quorum_binds_both_or_nothing() -> None:
    """A driver of 1 and workers with minCount 6 of 8 under minGroupCount 2."""
    quorum = Composite("job", (Leaf("driver", 1, 1, 1), Leaf("workers", 8, 6, 1)), 2, False)
    # Room for the driver and 5 workers: nothing binds.
    assert asyncio.run(run([3, 3], [quorum])) == {}
    # Room for the driver and 7 workers: they bind, the 8th waits.
    assert asyncio.run(run([4, 4], [quorum])) == {"driver": 1, "workers": 7}


def test_a_satisfied_composite_binds_nothing_of_a_leaf_below_its_own_quorum() -> None:
    """minGroupCount 1: the driver carries the composite; 5 of the workers' 6 fit, so
    none of them binds."""
    loose = Composite("job", (Leaf("driver", 1, 1, 1), Leaf("workers", 8, 6, 1)), 1, False)
    assert asyncio.run(run([3, 3], [loose])) == {"driver": 1}
