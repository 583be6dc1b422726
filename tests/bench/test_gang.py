"""``python -m bench gang``: shape names, the two profiles, per-gang attribution of
pod-by-pod cycles, and a smoke run of a tiny shape through the real server process
(figures are checked for presence and consistency, never for speed)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from bench.gang import UPSTREAM_SHAPES, GangStats, Shape, parse_shapes, scheduler_config
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.queue.entity import QueuedEntity, QueuedPodInfo
from troupe.scheduler.loop.schedule_one import Scheduler
from troupe.scheduler.observe.stats import AttemptStats

from tests.plugins.builders import make_pod

ROOT = Path(__file__).resolve().parents[2]
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


class FakeQueue:
    def __init__(self, entities: list[QueuedEntity]) -> None:
        self.entities = entities

    async def pop(self) -> QueuedEntity | None:
        return self.entities.pop(0) if self.entities else None


class FakeScheduler:
    def __init__(self, entities: list[QueuedEntity]) -> None:
        self.queue = FakeQueue(entities)
        self.stats = AttemptStats()


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
    fake = FakeScheduler(pods)
    stats = GangStats()
    stats.watch(cast(Scheduler, fake))
    for group, report, seconds in steps:
        if group is not None:
            await fake.queue.pop()
        if report == "cycle":
            stats.cycle(seconds)
        else:
            stats.attempt(report, "troupe-scheduler", seconds)
    assert dict(stats.group_cycle_seconds) == pytest.approx(per_gang)
    assert stats.bound_pods == bound


@pytest.fixture(scope="module")
def smoke() -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, "-m", "bench", "gang", *SMOKE_ARGS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    # The figures only mean something if nothing failed along the way (a binding
    # task that raises after the API call still counts a bound pod).
    assert "background task failed" not in run.stderr, run.stderr[-2000:]
    return cast(dict[str, Any], json.loads(run.stdout.strip().splitlines()[-1]))


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
