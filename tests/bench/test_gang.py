"""``python -m bench gang``: shape names, the two profiles, per-gang attribution of
pod-by-pod cycles, and smoke runs of tiny shapes through the real server process,
one of them topology-constrained (no gang may straddle a domain of its required
level). Figures are checked for presence and consistency, never for speed."""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict
from typing import Any

import pytest
from bench.gang import (
    UPSTREAM_SHAPES,
    Bound,
    GangStats,
    Shape,
    parse_shapes,
    scheduler_config,
)
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.queue.entity import QueuedEntity, QueuedPodInfo
from troupe.sim.nodespec import RACK_LABEL, ZONE_LABEL

from bench import server
from tests.bench.runner import run_bench
from tests.plugins.builders import make_pod

SMOKE_ARGS = ("--nodes", "20", "--shapes", "2x3", "--timeout", "60")


@pytest.mark.parametrize(
    ("text", "shapes"),
    [
        ("all", list(UPSTREAM_SHAPES)),
        ("2x3", [Shape(2, 3)]),
        ("3x1000,10x5000", [Shape(3, 1000), Shape(10, 5000)]),
    ],
    ids=["all is upstream's seven shapes", "a custom shape", "a list of shapes"],
)
def test_shape_names(text: str, shapes: list[Shape]) -> None:
    assert parse_shapes(text) == shapes


@pytest.mark.parametrize(
    "text",
    ["3", "x3", "0x3", "3x", "threex3"],
    ids=["no x", "no gangs", "zero gangs", "no size", "words"],
)
def test_a_malformed_shape_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected <gangs>x<pods per gang>"):
        parse_shapes(text)


def test_upstream_shapes_fit_the_nodes() -> None:
    # 100m / 128Mi members on 5000 nodes of 4 CPU / 32Gi / 110 pods.
    largest = max(s.pods for s in UPSTREAM_SHAPES)
    assert largest == 50_000
    assert largest * 100 <= 5000 * 4000 and largest * 128 <= 5000 * 32 * 1024
    assert largest <= 5000 * 110


ARGS = argparse.Namespace(concurrency=64, qps=1000.0, permit_wait=60)


@pytest.mark.parametrize(
    ("algorithm", "size", "queue_sort", "permit", "binding_concurrency"),
    [
        ("troupe", 1000, ["PrioritySort"], [], 64),
        ("coscheduling", 3, ["Coscheduling"], ["Coscheduling"], 64),
        ("coscheduling", 1000, ["Coscheduling"], ["Coscheduling"], 1001),
    ],
    ids=[
        "troupe runs the default profile",
        "coscheduling runs scheduler-plugins' profile",
        "coscheduling gets a binding slot for every member waiting at Permit",
    ],
)
def test_profiles(
    algorithm: str, size: int, queue_sort: list[str], permit: list[str], binding_concurrency: int
) -> None:
    config = scheduler_config(algorithm, ARGS, size)
    points = config.profiles[0].points
    assert [r.name for r in points["queueSort"]] == queue_sort
    assert [r.name for r in points["permit"]] == permit
    assert config.binding_concurrency == binding_concurrency
    assert config.client_connection.qps == 1000.0


def entity(name: str, group: str | None) -> QueuedPodInfo:
    builder = make_pod().name(name)
    if group is not None:
        builder.label("scheduling.x-k8s.io/pod-group", group)
    pod: Pod = builder.obj()
    return QueuedPodInfo.of(PodInfo.of(pod), 0.0)


# A step pops the next pod of the named gang ("" for a pod without one) and reports
# a cycle, or reports a binding (no pop: bindings run beside the loop).
Step = tuple[str | None, str, float]


@pytest.mark.parametrize(
    ("steps", "per_gang", "bound"),
    [
        ([("a", "cycle", 0.002), ("a", "cycle", 0.003)], {"default/a": 0.005}, 0),
        (
            [("a", "cycle", 0.002), ("b", "unschedulable", 0.004)],
            {"default/a": 0.002, "default/b": 0.004},
            0,
        ),
        (
            [("a", "cycle", 0.002), (None, "scheduled", 0.5), (None, "error", 0.0)],
            {"default/a": 0.002},
            1,
        ),
        ([("", "cycle", 0.002), ("a", "cycle", 0.001)], {"default/a": 0.001}, 0),
    ],
    ids=[
        "two successful cycles of one gang add up",
        "a failed cycle counts for the gang of the pod popped last",
        "bindings and binding failures are not cycles",
        "a pod without a gang counts for none",
    ],
)
async def test_pod_cycles_are_attributed_to_their_gang(
    steps: list[Step], per_gang: dict[str, float], bound: int
) -> None:
    pops = [step[0] for step in steps if step[0] is not None]
    pods: list[QueuedEntity] = [entity(f"p{i}", group or None) for i, group in enumerate(pops)]
    stats = GangStats()
    hooks = stats.loop_hooks()
    for group, report, seconds in steps:
        if group is not None:
            # The loop's pop, as the daemon's hooks see it.
            hooks.before_pop()
            hooks.popped(pods.pop(0))
        if report == "cycle":
            stats.cycle(seconds)
        else:
            stats.attempt(report, "troupe-scheduler", seconds)
    assert dict(stats.group_cycle_seconds) == pytest.approx(per_gang)
    assert stats.bound_pods == bound


@pytest.fixture(scope="module")
def smoke() -> dict[str, Any]:
    run = run_bench("gang", *SMOKE_ARGS, timeout=180)
    # The figures only mean something if nothing failed along the way (a binding
    # task that raises after the API call still counts a bound pod).
    assert "background task failed" not in run.stderr, run.stderr[-2000:]
    return run.result


@pytest.mark.parametrize("algorithm", ["troupe", "coscheduling"])
def test_a_tiny_shape_binds_every_gang_whole(smoke: dict[str, Any], algorithm: str) -> None:
    figures = smoke["2x3"][algorithm]
    assert (figures["pods"], figures["pods_bound"]) == (6, 6)
    assert (figures["groups"], figures["groups_scheduled"]) == (2, 2)
    assert figures["timed_out"] is False
    assert figures["pods_per_second"] > 0 and figures["seconds"] > 0
    assert figures["group_attempts"] >= 2
    assert 0 < figures["mean_group_attempt_ms"] <= figures["max_group_attempt_ms"]
    assert figures["p99_group_attempt_ms"] <= figures["max_group_attempt_ms"]


def test_the_ratio_is_troupe_over_coscheduling(smoke: dict[str, Any]) -> None:
    shape = smoke["2x3"]
    expected = shape["troupe"]["pods_per_second"] / shape["coscheduling"]["pods_per_second"]
    assert shape["ratio"] == pytest.approx(expected, rel=1e-2)


# --- topology-aware placement (issue 13) -----------------------------------------------

TOPOLOGY_SMOKE_SHAPES = "4x6@rack:1,2x8@zone+rack:1,1x30:1,1x30@zone:1"
# 20 nodes of 4 CPU in 2 zones x 2 racks: 5 nodes (20 CPU) per rack, 10 (40 CPU) per
# zone. Members of 1 CPU: a gang of 6 or 8 needs two nodes or more but fits a rack;
# a gang of 30 needs most of a zone (unconstrained, it spreads over both).
TOPOLOGY_SMOKE_ARGS = ("--nodes", "20", "--zones", "2", "--racks", "2", "--timeout", "60")


@pytest.mark.parametrize(
    ("text", "shape", "required", "preferred"),
    [
        ("1000x8@rack", Shape(1000, 8, "rack"), "troupe.dev/rack", ()),
        (
            "10x256@zone+rack:500m",
            Shape(10, 256, "zone+rack", "500m"),
            "topology.kubernetes.io/zone",
            ("troupe.dev/rack",),
        ),
        ("1x1000@zone", Shape(1, 1000, "zone"), "topology.kubernetes.io/zone", ()),
        (
            "2x3@example.com/pod+rack",
            Shape(2, 3, "example.com/pod+rack"),
            "example.com/pod",
            ("troupe.dev/rack",),
        ),
        ("3x4:2", Shape(3, 4, "", "2"), "", ()),
    ],
    ids=[
        "a required rack",
        "zone required, rack preferred, 500m",
        "a required zone",
        "any label key",
        "a CPU request and no topology",
    ],
)
def test_topology_shape_names(
    text: str, shape: Shape, required: str, preferred: tuple[str, ...]
) -> None:
    (parsed,) = parse_shapes(text)
    assert parsed == shape
    assert parsed.name == text
    assert (parsed.required, parsed.preferred) == (required, preferred)


def test_topology_runs_each_shape_after_its_unconstrained_twin() -> None:
    assert [s.name for s in parse_shapes("topology")] == [
        "1000x8",
        "1000x8@rack",
        "10x256:500m",
        "10x256@zone+rack:500m",
        "1x1000",
        "1x1000@zone",
    ]


@pytest.mark.parametrize(
    "text", ["2x3@", "2x3@zone+", "2x3:"], ids=["no level", "empty level", "no cpu"]
)
def test_a_malformed_topology_shape_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=f"shape '{re.escape(text)}'"):
        parse_shapes(text)


def test_the_topology_nodes_are_5_zones_of_20_racks_of_50() -> None:
    racks: Counter[tuple[str, str]] = Counter()
    for i in range(5000):
        labels = server.node(i, 5, 20)["metadata"]["labels"]
        racks[(labels[ZONE_LABEL], labels[RACK_LABEL])] += 1
    assert len({zone for zone, _ in racks}) == 5
    assert len(racks) == 100 and set(racks.values()) == {50}
    assert all(rack.startswith(f"{zone}-r") for zone, rack in racks)
    # Without racks, the nodes are what the other benches have always had.
    assert server.node(4)["metadata"]["labels"] == {
        "kubernetes.io/hostname": "node-4",
        ZONE_LABEL: "zone-1",
    }


def test_straddling_gangs_are_counted_per_domain() -> None:
    bound = Bound(
        defaultdict(list, {"a": ["n1", "n2"], "b": ["n1", "n3"], "c": ["n4"]}),
        {
            "n1": {ZONE_LABEL: "z0", RACK_LABEL: "z0-r0"},
            "n2": {ZONE_LABEL: "z0", RACK_LABEL: "z0-r1"},
            "n3": {ZONE_LABEL: "z1", RACK_LABEL: "z1-r0"},
            "n4": {},
        },
    )
    assert bound.straddling(ZONE_LABEL) == 2  # b over two zones, c on an unlabelled node
    assert bound.straddling(RACK_LABEL) == 3
    assert bound.spread(RACK_LABEL) == {"1": 1, "2": 2}
    assert bound.per_gang() == Counter({"a": 2, "b": 2, "c": 1})


@pytest.fixture(scope="module")
def topology_smoke() -> dict[str, Any]:
    args = (*TOPOLOGY_SMOKE_ARGS, "--shapes", TOPOLOGY_SMOKE_SHAPES, "--algorithms", "troupe")
    run = run_bench("gang", *args, timeout=120)
    assert "background task failed" not in run.stderr, run.stderr[-2000:]
    return run.result


@pytest.mark.parametrize(
    ("shape", "racks"),
    [("4x6@rack:1", None), ("2x8@zone+rack:1", {"1": 2}), ("1x30@zone:1", None)],
    ids=["a required rack", "zone required, rack preferred", "a required zone"],
)
def test_a_tiny_topology_shape_binds_every_gang_in_one_domain(
    topology_smoke: dict[str, Any], shape: str, racks: dict[str, int] | None
) -> None:
    figures = topology_smoke[shape]["troupe"]
    assert figures["pods_bound"] == figures["pods"]
    assert figures["groups_scheduled"] == figures["groups"]
    assert figures["timed_out"] is False
    assert figures["straddling_gangs"] == 0
    if racks is not None:
        assert figures["racks_per_gang"] == racks


def test_the_unconstrained_twin_is_compared_in_the_same_run(
    topology_smoke: dict[str, Any],
) -> None:
    twin, constrained = topology_smoke["1x30:1"]["troupe"], topology_smoke["1x30@zone:1"]["troupe"]
    assert twin["straddling_gangs"] is None
    # The check is not vacuous: left alone, the gang goes over both zones.
    assert twin["zones_per_gang"] == {"2": 1}
    assert constrained["zones_per_gang"] == {"1": 1}
    expected = constrained["mean_group_attempt_ms"] / twin["mean_group_attempt_ms"]
    assert constrained["attempt_ratio"] == pytest.approx(expected, rel=1e-2)
