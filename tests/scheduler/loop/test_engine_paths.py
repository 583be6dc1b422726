"""schedule_one's less travelled paths: plugin errors end to end, scores out of
range, Skip, several profiles, and how many nodes a cycle looks at."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from troupe.api.cycle import CycleState
from troupe.api.framework import FilterResult, PreFilterResult
from troupe.api.nodetable import IndexArray, IntArray, NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.status import SKIP, SUCCESS, Status
from troupe.plugins.registry import PluginSpec, Registry, default_registry
from troupe.queue.entity import QueuedPodInfo
from troupe.scheduler.cycle.results import ScheduleResult

from tests.plugins.builders import make_node, make_pod
from tests.scheduler.harness import Harness


def node(name: str, cpu: str = "4"):
    return make_node().name(name).capacity(cpu=cpu, memory="8Gi", pods=110)


def pod(name: str, scheduler: str = "troupe-scheduler"):
    return make_pod().name(name).uid(name).req(cpu="1").scheduler_name(scheduler)


def registry_with(*plugins: Any) -> Registry:
    registry = default_registry()
    for p in plugins:
        registry.register(PluginSpec(p.name, lambda a, h, p=p: p, None, type(p)))
    return registry


class RaisingFilter:
    name = "RaisingFilter"

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        raise ValueError("label index corrupt")


class FixedScore:
    """Scores every node ``value`` (whatever the range)."""

    name = "FixedScore"

    def __init__(self, value: int) -> None:
        self.value = value

    def score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> IntArray:
        return np.full(len(slots), self.value, dtype=np.int64)


class SkippingPlugin:
    """Skips at PreFilter and PreScore; its Filter and Score must then never run."""

    name = "SkippingPlugin"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        return None, SKIP

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        self.calls.append("filter")
        return FilterResult.none(table, "rejected by a skipped plugin")

    def pre_score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> Status:
        return SKIP

    def score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> IntArray:
        self.calls.append("score")
        raise AssertionError("Score of a plugin that skipped at PreScore")


class SlotRecorder:
    """Records the slots each cycle scores (PreScore sees exactly those)."""

    name = "SlotRecorder"

    def __init__(self) -> None:
        self.cycles: list[list[int]] = []

    def pre_score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> Status:
        self.cycles.append(sorted(int(s) for s in slots))
        return SUCCESS


def _queued(h: Harness, key: str) -> tuple[str, QueuedPodInfo]:
    for name in ("unschedulable", "backoff", "active"):
        for entity in h.scheduler.queue.entities(name):  # type: ignore[arg-type]
            if entity.key == key and isinstance(entity, QueuedPodInfo):
                return name, entity
    raise AssertionError(f"{key} is not queued")


async def test_a_raising_filter_plugin_fails_the_pod_with_a_scheduler_error() -> None:
    h = Harness(
        {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "RaisingFilter"}]}}}]},
        registry=registry_with(RaisingFilter()),
    ).nodes([node("n1").obj()])
    h.pods([pod("p").obj()])
    await h.settle()
    assert h.client.bindings == []
    condition = h.client.conditions["default/p"]
    assert condition.reason == "SchedulerError"
    assert condition.message == 'running "RaisingFilter" filter plugin: label index corrupt'
    # An error is retried after backoff, not parked waiting for a cluster event.
    where, entity = _queued(h, "default/p")
    assert where == "backoff" and entity.unschedulable_plugins == set()
    await h.close()


@pytest.mark.parametrize("value", [101, -1], ids=["above 100", "negative"])
async def test_a_score_out_of_range_is_an_error_naming_the_plugin(value: int) -> None:
    plugins = {"score": {"enabled": [{"name": "FixedScore"}]}}
    h = Harness(
        {"profiles": [{"plugins": plugins}]}, registry=registry_with(FixedScore(value))
    ).nodes([node("n1").obj(), node("n2").obj()])
    h.pods([pod("p").obj()])
    await h.settle()
    assert h.client.bindings == []
    condition = h.client.conditions["default/p"]
    assert condition.reason == "SchedulerError"
    assert condition.message == (
        f'running "FixedScore" score plugin: score out of range [0, 100]: {value}..{value}'
    )
    await h.close()


async def test_a_plugin_that_skips_is_not_run_at_filter_or_score() -> None:
    skipping = SkippingPlugin()
    enabled = [{"name": "SkippingPlugin"}]
    points = ("preFilter", "filter", "preScore", "score")
    h = Harness(
        {"profiles": [{"plugins": {point: {"enabled": enabled} for point in points}}]},
        registry=registry_with(skipping),
    ).nodes([node("n1").obj(), node("n2").obj()])
    h.pods([pod("p").obj()])
    await h.settle()
    assert h.client.node_of("default/p") in {"n1", "n2"}
    assert skipping.calls == []
    await h.close()


async def test_each_pod_is_scheduled_by_the_profile_its_scheduler_name_names() -> None:
    only_fit = {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit"}]}}

    def strategy(kind: str) -> list[dict[str, Any]]:
        return [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": kind}}}]

    h = Harness(
        {
            "profiles": [
                {"schedulerName": "spreader", "plugins": only_fit},
                {
                    "schedulerName": "packer",
                    "plugins": only_fit,
                    "pluginConfig": strategy("MostAllocated"),
                },
            ]
        }
    ).nodes([node("busy").obj(), node("idle").obj()])
    h.handlers.on_pod_add(pod("running").node("busy").req(cpu="2").obj())
    h.pods([pod("spread", "spreader").obj()])
    await h.settle()
    h.pods([pod("pack", "packer").obj(), pod("stranger", "default-scheduler").obj()])
    await h.settle()
    # LeastAllocated (the default) picks the idle node, MostAllocated the busy one.
    assert h.client.node_of("default/spread") == "idle"
    assert h.client.node_of("default/pack") == "busy"
    assert h.client.node_of("default/stranger") is None
    assert "default/stranger" not in h.scheduler.queue
    await h.close()


def test_a_cycle_scores_the_configured_share_of_nodes_and_the_next_one_goes_on() -> None:
    recorder = SlotRecorder()
    h = Harness(
        {
            "percentageOfNodesToScore": 50,
            "profiles": [{"plugins": {"preScore": {"enabled": [{"name": "SlotRecorder"}]}}}],
        },
        registry=registry_with(recorder),
    ).nodes([node(f"n{i:03}").obj() for i in range(200)])
    # Slot 150 cannot take the pod: it is looked at but not counted as feasible.
    h.handlers.on_pod_add(pod("filler").node("n150").req(cpu="4").obj())
    s = h.parts
    fwk = s.profiles["troupe-scheduler"]
    info = pod("p").info()
    results = []
    for _ in range(3):
        result = s.algorithm.schedule_pod(fwk, s.algorithm.new_cycle_state(), info)
        assert isinstance(result, ScheduleResult)
        results.append(result)
    slot = s.cache.table.index

    def slots(*numbers: int) -> list[int]:
        return sorted(slot[f"n{i:03}"] for i in numbers)

    # 200 nodes at 50%: 100 feasible nodes per cycle, each cycle starting where the
    # last one stopped, so every node gets its turn (upstream nextStartNodeIndex).
    assert recorder.cycles[0] == slots(*range(100))
    assert (results[0].evaluated_nodes, results[0].feasible_nodes) == (100, 100)
    # n150 is full: the 100th feasible node is n000, 101 nodes were evaluated.
    assert recorder.cycles[1] == slots(*(i for i in range(100, 200) if i != 150), 0)
    assert (results[1].evaluated_nodes, results[1].feasible_nodes) == (101, 100)
    assert recorder.cycles[2] == slots(*range(1, 101))
