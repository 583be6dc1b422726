"""The KEP-5732 placement plugins: TopologyPlacement, PodGroupPodsCount, GangScheduling
and NodeResourcesFit as a placement scorer."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from troupe.api.framework import Placement, PlacementAssignment
from troupe.api.gangs import GangApi
from troupe.api.nodetable import NodeTable
from troupe.api.status import Code
from troupe.api.topology import TopologyLevels
from troupe.plugins.gangscheduling import GangScheduling
from troupe.plugins.podgrouppodscount import PodGroupPodsCount
from troupe.plugins.topologyplacement import TopologyPlacement, TopologyPlacementArgs
from troupe.scheduler.gangs.topology import num_placements_to_score

from tests.plugins.builders import make_node
from tests.plugins.fakes import FakeHandle
from tests.plugins.fit_helpers import fit

RACK = "example.com/rack"
ZONE = "topology.kubernetes.io/zone"


def table(*nodes: tuple[str, dict[str, str], str]) -> NodeTable:
    t = NodeTable()
    for name, labels, cpu in nodes:
        t.add_node(make_node().name(name).labels(labels).capacity(cpu=cpu, memory="8Gi").obj())
    return t


def root(t: NodeTable) -> Placement:
    return Placement("", t.present.copy())


def names(t: NodeTable, p: Placement) -> list[str]:
    return sorted(t.names[int(s)] for s in np.flatnonzero(p.nodes & t.present))


def test_one_placement_per_label_value_in_value_order_inside_the_parent() -> None:
    t = table(
        ("a1", {ZONE: "a", RACK: "r2"}, "4"),
        ("a2", {ZONE: "a", RACK: "r1"}, "4"),
        ("b1", {ZONE: "b", RACK: "r1"}, "4"),
        ("x", {}, "4"),
    )
    plugin = TopologyPlacement(None, FakeHandle(t))
    racks, status = plugin.generate_placements(RACK, t, root(t))
    assert status.is_success
    assert [(p.name, names(t, p)) for p in racks] == [
        (f"{RACK}=r1", ["a2", "b1"]),
        (f"{RACK}=r2", ["a1"]),
    ]
    (zone_a, _), _ = plugin.generate_placements(ZONE, t, root(t))
    inside, _ = plugin.generate_placements(RACK, t, zone_a)
    # The same value in another zone is another domain: only zone a's nodes.
    assert [(p.name, names(t, p)) for p in inside] == [
        (f"{ZONE}=a/{RACK}=r1", ["a2"]),
        (f"{ZONE}=a/{RACK}=r2", ["a1"]),
    ]


def test_no_node_with_the_label_is_upstreams_unschedulable_message() -> None:
    t = table(("n", {}, "4"))
    found, status = TopologyPlacement(None, FakeHandle(t)).generate_placements(RACK, t, root(t))
    assert found == []
    assert status.code is Code.UNSCHEDULABLE
    assert status.message == f"no nodes found with topology label '{RACK}'"


def test_placements_follow_a_relabelled_node() -> None:
    t = table(("n1", {RACK: "r1"}, "4"), ("n2", {RACK: "r1"}, "4"))
    plugin = TopologyPlacement(None, FakeHandle(t))
    assert len(plugin.generate_placements(RACK, t, root(t))[0]) == 1
    t.update_node(make_node().name("n2").labels({RACK: "r2"}).capacity(cpu="4").obj())
    assert len(plugin.generate_placements(RACK, t, root(t))[0]) == 2


def test_profile_defaults_apply_per_api_only_when_the_group_asks_for_none() -> None:
    args = TopologyPlacementArgs.model_validate(
        {
            "defaults": [
                {"api": "scheduling.x-k8s.io/v1alpha1", "required": ZONE, "preferred": [RACK]}
            ]
        }
    )
    plugin = TopologyPlacement(args, FakeHandle())
    assert plugin.levels(GangApi.COSCHEDULING, TopologyLevels()) == TopologyLevels(ZONE, (RACK,))
    assert plugin.levels(GangApi.COSCHEDULING, TopologyLevels(RACK)) == TopologyLevels(RACK)
    assert plugin.levels(GangApi.POD_GROUP, TopologyLevels()) == TopologyLevels()


@pytest.mark.parametrize(
    ("default", "error"),
    [
        ({"api": "example.com/v1", "required": ZONE}, "unsupported value 'example.com/v1'"),
        ({"api": "scheduling.k8s.io/v1alpha2", "required": "a/b/c"}, "required: Invalid value"),
        ({"api": "scheduling.k8s.io/v1alpha2", "required": ZONE, "preferred": [ZONE]}, "twice"),
    ],
)
def test_bad_defaults_are_rejected_naming_the_field(default: dict[str, object], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        TopologyPlacementArgs.model_validate({"defaults": [default]})


def test_pods_count_scores_normalize_to_the_highest_count() -> None:
    plugin = PodGroupPodsCount(None, FakeHandle())
    p = Placement("p", np.zeros(1, dtype=bool))
    scores = [plugin.score_placement(NodeTable(), PlacementAssignment(p, n, {})) for n in (8, 6, 2)]
    assert plugin.normalize_placement_score(scores).is_success
    assert scores == [100, 75, 25]
    assert plugin.normalize_placement_score([0, 0]).code is Code.ERROR


def test_gang_scheduling_ends_a_placement_once_min_count_is_out_of_reach() -> None:
    plugin = GangScheduling(None, FakeHandle())
    assert plugin.placement_feasible(4, 4, 0).is_success
    waiting = plugin.placement_feasible(4, 2, 3)
    assert waiting.code is Code.WAIT
    assert waiting.message == "minCount (4) is not yet satisfied: 2 scheduled, 3 remaining"
    out = plugin.placement_feasible(4, 2, 1)
    assert out.code is Code.UNSCHEDULABLE
    assert out.message == "minCount (4) cannot be satisfied: 2 scheduled, 1 remaining"


def test_fit_scores_a_placement_by_most_allocated_over_its_nodes() -> None:
    t = table(("a", {RACK: "r1"}, "4"), ("b", {RACK: "r1"}, "4"), ("c", {RACK: "r2"}, "8"))
    plugin = fit()
    racks, _ = TopologyPlacement(None, FakeHandle(t)).generate_placements(RACK, t, root(t))
    r1, r2 = racks
    # r1: 4 of 8 cpu (50) and 4 of 16 Gi (25) -> 37; r2: 4 of 8 cpu, 4 of 8 Gi -> 50.
    request = {"cpu": 4000, "memory": 4 * 1024**3}
    assert plugin.score_placement(t, PlacementAssignment(r1, 2, request)) == 37
    assert plugin.score_placement(t, PlacementAssignment(r2, 2, request)) == 50


@pytest.mark.parametrize(
    ("percentage", "placements", "nodes", "expected"),
    [
        (0, 20, 60, 20),  # a small cluster: every placement
        (0, 100, 5000, 10),  # 10% at 5000 nodes
        (0, 100, 15000, 5),  # never below 5%
        (0, 3, 5000, 1),  # at least one
        (50, 10, 5000, 5),  # the configured share
    ],
)
def test_how_many_placements_are_scored(
    percentage: int, placements: int, nodes: int, expected: int
) -> None:
    assert num_placements_to_score(percentage, placements, nodes) == expected
