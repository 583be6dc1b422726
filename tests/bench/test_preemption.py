"""``python -m bench preemption``: shape names, the brute-force minimum on hand-made
clusters, and a smoke run of a tiny full cluster through the real server process (a
gang of 4 that needs single low-priority pods evicted). Figures are checked for
presence and consistency, never for speed."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from bench.preemption import (
    Cluster,
    Fill,
    Preemptor,
    Shape,
    Unit,
    cluster_from,
    minimum_victims,
    parse_shapes,
)
from troupe.sim.nodespec import RACK_LABEL

from bench import server
from tests.bench.runner import run_bench

# 20 nodes of 4 CPU in 2 zones x 2 racks, each full of 4 low-priority pods of 1 CPU:
# 80 pods, half of them in 5 `all` gangs of 8, so every node holds 2 single pods.
SMOKE_ARGS = (
    "--nodes", "20", "--zones", "2", "--racks", "2", "--pods-per-node", "4",
    "--shapes", "1x4", "--timeout", "20",
)  # fmt: skip


def test_shape_names() -> None:
    assert parse_shapes("1x1000,100x8,1x64@rack") == [
        Shape(1, 1000),
        Shape(100, 8),
        Shape(1, 64, "rack"),
    ]
    assert Shape(1, 64, "rack").required == RACK_LABEL


@pytest.mark.parametrize("text", ["3", "0x3", "1x4@", "x4"])
def test_a_malformed_shape_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_shapes(text)


def test_the_default_fill_is_half_singles_half_gangs_of_eight() -> None:
    fill = Fill(5000, 5, 20, 10, 0.5)
    assert (fill.pods, fill.gangs, fill.cpu_milli) == (50_000, 3125, 400)


def _full(nodes: int, singles_per_node: int, gangs: int) -> Cluster:
    """``nodes`` full nodes (4 CPU): per node ``singles_per_node`` single pods of 1 CPU,
    the rest filled by ``gangs`` all-gangs with one 1-CPU member on every node."""
    names = [f"n{i}" for i in range(nodes)]
    units = [Unit(f"s-{n}-{k}", ((n, 1000),)) for n in names for k in range(singles_per_node)]
    units += [Unit(f"g{g}", tuple((n, 1000) for n in names)) for g in range(gangs)]
    labels = {n: {RACK_LABEL: f"r{i // 2}"} for i, n in enumerate(names)}
    return Cluster({n: 0 for n in names}, labels, units, [])


def test_the_minimum_takes_single_pods_when_they_suffice() -> None:
    # A gang of 3: 3 single pods, not one gang of 4 (found first, at one unit).
    cluster = _full(4, 2, 2)
    cluster.preemptors = [Preemptor("p", (1000,) * 3)]
    assert minimum_victims(cluster) == (3, ["s-n0-0", "s-n0-1", "s-n1-0"])


def test_the_minimum_evicts_a_whole_gang_when_single_pods_are_too_few() -> None:
    # 8 single pods, 2 gangs of 4: a gang of 10 needs every single pod and one gang
    # (8 + 4 = 12), or both gangs and 2 single pods (8 + 2 = 10).
    cluster = _full(4, 2, 2)
    cluster.preemptors = [Preemptor("p", (1000,) * 10)]
    best = minimum_victims(cluster)
    assert best is not None and best[0] == 10
    assert {"g0", "g1"} <= set(best[1])


def test_a_rack_gang_needs_its_room_in_one_rack() -> None:
    # Racks of 2 nodes hold 4 single pods and 2 members of each gang: a gang of 5 in
    # one rack needs 3 single pods and a gang (7 pods); unconstrained, a gang of 9
    # needs both gangs and a single pod; 17 never fits 16 CPU.
    cluster = _full(4, 2, 2)
    cluster.preemptors = [Preemptor("p", (1000,) * 5, RACK_LABEL)]
    assert minimum_victims(cluster) == (7, ["s-n0-0", "s-n0-1", "s-n1-0", "g0"])
    cluster.preemptors = [Preemptor("p", (1000,) * 9)]
    assert minimum_victims(cluster) == (9, ["s-n0-0", "g0", "g1"])
    cluster.preemptors = [Preemptor("p", (1000,) * 17)]
    assert minimum_victims(cluster) is None


def test_the_cluster_is_read_from_api_objects() -> None:
    nodes = [server.node(i, zones=1, racks=1) for i in range(2)]
    pods = [
        server.pod(f"existing-{i}", f"node-{i % 2}", cpu="2", pod_group=g)
        for i, g in enumerate(["low-gang-0000", "low-gang-0000", "", ""])
    ]
    for p in pods:
        p["spec"]["priority"] = 100
    high = server.pod("gang-0000-0000", cpu="1", pod_group="gang-0000")
    high["spec"]["priority"] = 1000
    groups = [
        server.v1beta1_pod_group("low-gang-0000", 2, priority=100, disrupt_all=True),
        server.v1beta1_pod_group("gang-0000", 1, priority=1000, topology=RACK_LABEL),
    ]
    cluster = cluster_from(nodes, [*pods, high], groups)
    assert cluster.free == {"node-0": 0, "node-1": 0}
    assert cluster.priority == 1000
    assert [u.name for u in cluster.units] == ["existing-2", "existing-3", "low-gang-0000"]
    assert cluster.preemptors == [Preemptor("gang-0000", (1000,), RACK_LABEL)]
    assert minimum_victims(cluster) == (1, ["existing-2"])


def test_existing_pods_join_the_first_gangs_in_runs_of_their_size() -> None:
    groups = [server.existing_group(i, 2, 8) for i in range(20)]
    assert groups[:8] == ["low-gang-0000"] * 8
    assert groups[8:16] == ["low-gang-0001"] * 8
    assert groups[16:] == [""] * 4


def _bench(*args: str) -> dict[str, Any]:
    run = run_bench("preemption", *args, timeout=120)
    assert "background task failed" not in run.stderr, run.stderr[-2000:]
    return run.result


def test_a_gang_preempts_single_pods_on_a_full_cluster() -> None:
    figures = _bench(*SMOKE_ARGS)["1x4"]
    assert (figures["pods"], figures["pods_bound"]) == (4, 4)
    assert (figures["groups"], figures["groups_scheduled"]) == (1, 1)
    assert figures["timed_out"] is False
    assert figures["victims"] >= figures["victims_lower_bound"] == 4
    assert figures["victims"] == figures["victims_single"] + figures["victims_gang_members"]
    assert figures["partly_evicted_gangs"] == 0
    assert figures["decisions"] >= 1
    assert figures["preemption_attempts"] >= 1
    assert 0 < figures["max_decision_ms"] <= figures["max_preemption_attempt_ms"]
    assert figures["group_attempts"]["waiting_on_preemption"] == figures["preemption_attempts"]
