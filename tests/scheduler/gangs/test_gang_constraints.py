"""Constraints between the members of a gang, and against running pods, honoured
in the pod-group cycle (KEP-4671: each placement is assumed at once, so the next
member sees its siblings for affinity and spread).

Node sizes are chosen so the default scoring (LeastAllocated) alone would place
members differently: each case shows the constraint, not the scorer, at work.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import pytest
from troupe.api.gangs import POD_GROUP_LABEL, GangApi
from troupe.api.objects import Node, Pod

from tests.plugins.builders import PodBuilder, make_node, make_pod
from tests.scheduler.gang_helpers import coscheduling_group, native_group, workload
from tests.scheduler.harness import Harness

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(name: str, cpu: int, zone: str = "zone-a") -> Node:
    return (
        make_node()
        .name(name)
        .capacity(cpu=str(cpu), memory="64Gi", pods=110)
        .label(HOST, name)
        .label(ZONE, zone)
        .obj()
    )


def gang_member(group: str, i: int, api: str = "coscheduling") -> PodBuilder:
    b = (
        make_pod()
        .name(f"{group}-{i}")
        .scheduler_name("troupe-scheduler")
        .label("app", group)
        .req(cpu="1", memory="1Gi")
    )
    if api == "coscheduling":
        return b.label(POD_GROUP_LABEL, group)
    if api == "workload":
        return b.workload_ref(group, "workers")
    return b.scheduling_group(group)


def start(
    nodes: Iterable[Node],
    group: str,
    min_count: int,
    api: str = "coscheduling",
    batching: bool = True,
) -> Harness:
    # Runs of identical members are placed as a batch unless this is off.
    h = Harness(batching=batching).nodes(nodes)
    if api == "coscheduling":
        h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group(group, min_count))
    elif api == "workload":
        h.handlers.on_group_add(GangApi.WORKLOAD, workload(group, {"workers": min_count}))
    else:
        h.handlers.on_group_add(GangApi.POD_GROUP, native_group(group, min_count))
    return h


def placements(h: Harness, group: str) -> dict[str, str]:
    """Member name -> node, for the members the scheduler bound."""
    return {
        key.split("/")[1]: n
        for key, n in h.client.bindings
        if key.split("/")[1].rsplit("-", 1)[0] == group
    }


def zone_of(name: str, nodes: list[Node]) -> str:
    return next(n.metadata.labels[ZONE] for n in nodes if n.metadata.name == name)


def running(name: str, node_name: str, app: str) -> PodBuilder:
    return make_pod().name(name).label("app", app).req(cpu="1").node(node_name)


# --- pod anti-affinity between members ---------------------------------------------------


BATCHING = [pytest.param(True, id="batched"), pytest.param(False, id="one by one")]


@pytest.mark.parametrize("batching", BATCHING)
@pytest.mark.parametrize("api", ["coscheduling", "workload", "podgroup"])
async def test_members_anti_affine_to_each_other_get_one_node_each(
    api: str, batching: bool
) -> None:
    # n0 is large: LeastAllocated alone would stack several members there.
    cluster = [node("n0", 32), node("n1", 2), node("n2", 2), node("n3", 2)]
    h = start(cluster, "g", 4, api, batching)
    h.pods(gang_member("g", i, api).pod_anti_affinity(HOST, {"app": "g"}).obj() for i in range(4))
    await h.settle()
    placed = placements(h, "g")
    assert sorted(placed.values()) == ["n0", "n1", "n2", "n3"]
    await h.close()


async def test_anti_affine_members_with_too_few_nodes_are_rejected_whole() -> None:
    h = start([node("n0", 32), node("n1", 32), node("n2", 32)], "g", 4)
    h.pods(gang_member("g", i).pod_anti_affinity(HOST, {"app": "g"}).obj() for i in range(4))
    await h.settle()
    assert placements(h, "g") == {}
    assert h.scheduler.cache.assumed_count == 0
    unschedulable = [c for c in h.client.conditions.values() if c.reason == "Unschedulable"]
    assert len(unschedulable) == 1
    assert unschedulable[0].message == (
        "gang default/g: 3 of 4 required pods fit; 0/3 nodes are available: "
        "3 node(s) didn't match pod anti-affinity rules."
    )
    await h.close()


async def test_anti_affine_members_beyond_the_quorum_wait_for_a_node() -> None:
    h = start([node("n0", 32), node("n1", 32), node("n2", 32)], "g", 3)
    h.pods(gang_member("g", i).pod_anti_affinity(HOST, {"app": "g"}).obj() for i in range(4))
    await h.settle()
    placed = placements(h, "g")
    assert len(placed) == 3 and len(set(placed.values())) == 3
    # A fourth node: the last member goes there, not next to a sibling.
    h.nodes([node("n3", 1)])
    await h.advance(10)
    await h.settle()
    assert sorted(placements(h, "g").values()) == ["n0", "n1", "n2", "n3"]
    await h.close()


# --- topology spread between members -----------------------------------------------------


def three_zones(zone_a_cpu: int = 32, zone_c_cpu: int = 8) -> list[Node]:
    return [
        node("a0", zone_a_cpu, "zone-a"),
        node("a1", zone_a_cpu, "zone-a"),
        node("b0", 8, "zone-b"),
        node("b1", 8, "zone-b"),
        node("c0", zone_c_cpu, "zone-c"),
    ]


def spread(b: PodBuilder) -> Pod:
    return b.spread_constraint(1, ZONE, {"app": "g"}).obj()


@pytest.mark.parametrize("batching", BATCHING)
@pytest.mark.parametrize(("size", "expected"), [(6, [2, 2, 2]), (7, [2, 2, 3]), (9, [3, 3, 3])])
async def test_members_spread_across_zones_with_max_skew_1(
    size: int, expected: list[int], batching: bool
) -> None:
    # zone-a is four times larger: without the constraint it would take most members.
    cluster = three_zones()
    h = start(cluster, "g", size, batching=batching)
    h.pods(spread(gang_member("g", i)) for i in range(size))
    await h.settle()
    per_zone = Counter(zone_of(n, cluster) for n in placements(h, "g").values())
    assert sorted(per_zone.values()) == expected
    assert set(per_zone) == {"zone-a", "zone-b", "zone-c"}
    await h.close()


async def test_spread_limited_by_the_smallest_zone_rejects_the_gang_whole() -> None:
    # zone-c holds one member: maxSkew 1 then allows at most 2 + 2 + 1 = 5.
    cluster = three_zones(zone_c_cpu=1)
    h = start(cluster, "g", 6)
    h.pods(spread(gang_member("g", i)) for i in range(6))
    await h.settle()
    assert placements(h, "g") == {}
    assert h.scheduler.cache.assumed_count == 0
    message = next(iter(h.client.conditions.values())).message
    assert message.startswith("gang default/g: 5 of 6 required pods fit; ")
    assert "didn't match pod topology spread constraints" in message
    await h.close()


async def test_spread_with_a_smaller_quorum_binds_what_keeps_the_skew() -> None:
    cluster = three_zones(zone_c_cpu=1)
    h = start(cluster, "g", 5)
    h.pods(spread(gang_member("g", i)) for i in range(6))
    await h.settle()
    per_zone = Counter(zone_of(n, cluster) for n in placements(h, "g").values())
    assert per_zone == {"zone-a": 2, "zone-b": 2, "zone-c": 1}
    await h.close()


# --- node affinity and taints ------------------------------------------------------------


async def test_members_with_node_affinity_stay_in_their_zone() -> None:
    cluster = three_zones()
    h = start(cluster, "g", 6)
    h.pods(gang_member("g", i).node_affinity_in(ZONE, "zone-b").obj() for i in range(6))
    await h.settle()
    placed = placements(h, "g")
    assert len(placed) == 6
    assert {zone_of(n, cluster) for n in placed.values()} == {"zone-b"}
    await h.close()


async def test_members_whose_affine_nodes_are_too_small_are_rejected_whole() -> None:
    cluster = three_zones(zone_c_cpu=2)
    h = start(cluster, "g", 3)
    h.pods(gang_member("g", i).node_affinity_in(ZONE, "zone-c").obj() for i in range(3))
    await h.settle()
    assert placements(h, "g") == {}
    message = next(iter(h.client.conditions.values())).message
    assert message == (
        "gang default/g: 2 of 3 required pods fit; 0/5 nodes are available: "
        "1 Insufficient cpu, 4 node(s) didn't match Pod's node affinity/selector."
    )
    await h.close()


def tainted_cluster() -> list[Node]:
    big = [
        make_node()
        .name(f"gpu{i}")
        .capacity(cpu="32", memory="64Gi", pods=110)
        .label(HOST, f"gpu{i}")
        .taint("dedicated", "gpu", "NoSchedule")
        .obj()
        for i in range(2)
    ]
    return [*big, node("n0", 1), node("n1", 1)]


async def test_members_without_a_toleration_do_not_use_tainted_nodes() -> None:
    h = start(tainted_cluster(), "g", 4)
    h.pods(gang_member("g", i).obj() for i in range(4))
    await h.settle()
    assert placements(h, "g") == {}
    message = next(iter(h.client.conditions.values())).message
    assert message == (
        "gang default/g: 2 of 4 required pods fit; 0/4 nodes are available: "
        "2 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}."
    )
    await h.close()


async def test_members_with_a_toleration_use_tainted_nodes() -> None:
    h = start(tainted_cluster(), "g", 4)
    h.pods(gang_member("g", i).toleration("dedicated", "gpu", "NoSchedule").obj() for i in range(4))
    await h.settle()
    placed = placements(h, "g")
    assert len(placed) == 4
    assert {n for n in placed.values() if n.startswith("gpu")}
    await h.close()


# --- against running pods ----------------------------------------------------------------


@pytest.mark.parametrize("batching", BATCHING)
async def test_members_avoid_running_pods_they_are_anti_affine_to(batching: bool) -> None:
    """A member's anti-affinity to a running pod, and a running pod's anti-affinity
    to the members (the symmetric check), both keep members off those nodes."""
    cluster = [node("n0", 32), node("n1", 32), node("n2", 2), node("n3", 2)]
    h = start(cluster, "g", 4, batching=batching)
    h.pods(
        [
            running("db", "n0", "db").obj(),
            running("guard", "n1", "guard").pod_anti_affinity(HOST, {"app": "g"}).obj(),
        ]
    )
    h.pods(gang_member("g", i).pod_anti_affinity(HOST, {"app": "db"}).obj() for i in range(4))
    await h.settle()
    assert Counter(placements(h, "g").values()) == {"n2": 2, "n3": 2}
    await h.close()


async def test_members_anti_affine_to_running_pods_everywhere_are_rejected_whole() -> None:
    cluster = [node("n0", 32), node("n1", 32), node("n2", 2)]
    h = start(cluster, "g", 3)
    h.pods([running("db0", "n0", "db").obj(), running("db1", "n1", "db").obj()])
    h.pods(gang_member("g", i).pod_anti_affinity(HOST, {"app": "db"}).obj() for i in range(3))
    await h.settle()
    assert placements(h, "g") == {}
    assert h.scheduler.cache.assumed_count == 0
    await h.close()


# --- pod affinity between members --------------------------------------------------------


async def test_members_affine_to_each_other_share_one_zone() -> None:
    cluster = [node("a0", 8, "zone-a"), node("b0", 8, "zone-b"), node("c0", 8, "zone-c")]
    h = start(cluster, "g", 6)
    h.pods(gang_member("g", i).pod_affinity(ZONE, {"app": "g"}).obj() for i in range(6))
    await h.settle()
    placed = placements(h, "g")
    assert len(placed) == 6
    assert len({zone_of(n, cluster) for n in placed.values()}) == 1
    await h.close()
