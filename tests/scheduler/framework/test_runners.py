"""Every extension-point runner has the same shape: the failing plugin's name is
stamped on the Status, and an error, raised or returned, reads
``running "<Plugin>" <point> plugin: <message>``; each point is timed."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import numpy as np
import pytest
from troupe.api.cycle import CycleState
from troupe.api.framework import (
    Diagnosis,
    DisruptionPlan,
    FilterResult,
    GroupEvaluation,
    GroupPreemptor,
    Placement,
    PlacementAssignment,
    PostFilterResult,
    PreFilterResult,
)
from troupe.api.gangs import GroupKey
from troupe.api.nodetable import IndexArray, IntArray, NodeTable
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.plugins.registry import PluginSpec, default_registry
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.service.wiring import Options

from tests.plugins.builders import make_node, make_pod
from tests.scheduler.harness import Harness

BOOM = RuntimeError("boom")


class Broken:
    """Fails at every point, by raising or by returning an ERROR Status."""

    name = "Broken"
    raises = False

    def _fail(self) -> Status:
        if self.raises:
            raise BOOM
        return Status.from_error(BOOM)

    def pre_enqueue(self, pod: Pod) -> Status:
        return self._fail()

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        return None, self._fail()

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        return FilterResult.failed(table, self._fail())

    def post_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        return None, self._fail()

    def pre_score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> Status:
        return self._fail()

    def score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> IntArray:
        self._fail()
        return np.zeros(len(slots), dtype=np.int64)

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return self._fail()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        return None

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        return self._fail(), 0.0

    def permit_disruption(self, state: CycleState, plan: DisruptionPlan) -> Status:
        return self._fail()

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return self._fail()

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return self._fail()

    def pod_group_post_filter(
        self, preemptor: GroupPreemptor, evaluate: Callable[[], GroupEvaluation]
    ) -> tuple[DisruptionPlan | None, Status]:
        return DisruptionPlan((), {}), self._fail()

    def placement_feasible(self, min_count: int, scheduled: int, remaining: int) -> Status:
        return self._fail()

    def score_placement(self, table: NodeTable, assignment: PlacementAssignment) -> int:
        self._fail()
        return 0


class Raising(Broken):
    raises = True


Run = Callable[[Framework, Harness, PodInfo], Status | Coroutine[Any, Any, Status]]


def _slots(h: Harness) -> IndexArray:
    return h.scheduler.cache.table.slots()


RUNNERS: dict[str, tuple[str, Run]] = {
    # profile point: (runner's point name in messages, how to call the runner)
    "preEnqueue": ("preEnqueue", lambda f, h, p: f.run_pre_enqueue(p.pod)),
    "preFilter": (
        "preFilter",
        lambda f, h, p: f.run_pre_filter(CycleState(), p, h.scheduler.cache.table)[1],
    ),
    "filter": (
        "filter",
        lambda f, h, p: (
            f.run_filter(
                CycleState(), p, h.scheduler.cache.table, h.scheduler.cache.table.present
            ).status
        ),
    ),
    "postFilter": (
        "postFilter",
        lambda f, h, p: f.run_post_filter(
            CycleState(), p, h.scheduler.cache.table, Diagnosis(num_nodes=1)
        )[1],
    ),
    "preScore": (
        "preScore",
        lambda f, h, p: f.run_pre_score(CycleState(), p, h.scheduler.cache.table, _slots(h)),
    ),
    "score": (
        "score",
        lambda f, h, p: f.run_score(CycleState(), p, h.scheduler.cache.table, _slots(h))[1],
    ),
    "reserve": ("reserve", lambda f, h, p: f.binding.run_reserve(CycleState(), p, "n1")),
    "permit": (
        "permit",
        lambda f, h, p: f.binding.run_permit(CycleState(), p, "n1", h.scheduler.waiting),
    ),
    "permitDisruption": (
        "permitDisruption",
        lambda f, h, p: f.binding.run_permit_disruption(
            CycleState(), DisruptionPlan((), {p.key: "n1"})
        ),
    ),
    "preBind": ("preBind", lambda f, h, p: f.binding.run_pre_bind(CycleState(), p, "n1")),
    "bind": ("bind", lambda f, h, p: f.binding.run_bind(CycleState(), p, "n1")),
    # The pod-group points run through the same runner.
    "podGroupPostFilter": (
        "podGroupPostFilter",
        lambda f, h, p: _group_post_filter(f, p),
    ),
    "placementFeasible": (
        "placementFeasible",
        lambda f, h, p: f.group.run_placement_feasible(2, 0, 2, CycleState()),
    ),
    "placementScore": (
        "placementScore",
        lambda f, h, p: f.group.run_placement_score(
            h.scheduler.cache.table,
            [PlacementAssignment(Placement("all", h.scheduler.cache.table.present), 1, {})],
            CycleState(),
        )[1],
    ),
}


def _group_post_filter(fwk: Framework, info: PodInfo) -> Status:
    preemptor = GroupPreemptor(GroupKey("default/g"), 0, 2, {info.key: info}, 0)
    plan, status = fwk.group.run_pod_group_post_filter(preemptor, lambda: (None, 0))
    assert plan is None  # an error carries no plan
    return status


def _harness(point: str, plugin: type[Broken]) -> tuple[Harness, list[tuple[str, str, str]]]:
    registry = default_registry()
    registry.register(PluginSpec(plugin.name, lambda a, h: plugin(), None, plugin))
    plugins: dict[str, Any] = {
        point: {"enabled": [{"name": plugin.name}], "disabled": [{"name": "*"}]}
    }
    h = Harness({"profiles": [{"plugins": plugins}]}, registry=registry)
    observed: list[tuple[str, str, str]] = []
    h.wire(Options(observer=lambda pt, pl, code, seconds: observed.append((pt, pl, code))))
    h.nodes([make_node().name("n1").capacity(cpu="4", memory="8Gi", pods=110).obj()])
    return h, observed


# Score and PlacementScore return scores, not a Status: they can only raise.
CASES = [
    pytest.param(point, plugin, id=f"{point} {how}")
    for point in RUNNERS
    for plugin, how in ((Broken, "returned"), (Raising, "raised"))
    if not (point in ("score", "placementScore") and plugin is Broken)
]


@pytest.mark.parametrize(("point", "plugin"), CASES)
async def test_an_error_is_wrapped_and_stamped_at_every_point(
    point: str, plugin: type[Broken]
) -> None:
    h, observed = _harness(point, plugin)
    fwk = h.parts.profiles["troupe-scheduler"]
    info = make_pod().name("p").req(cpu="1").scheduler_name("troupe-scheduler").info()
    name, run = RUNNERS[point]
    result = run(fwk, h, info)
    status = await result if not isinstance(result, Status) else result
    assert status.code is Code.ERROR
    assert status.message == f'running "{plugin.name}" {name} plugin: boom'
    assert status.plugin == plugin.name
    assert status.error is BOOM
    # The point was timed, with the failure's code, and the Status says where.
    point_label = point[0].upper() + point[1:]
    assert status.point == point_label
    assert (point_label, "", "ERROR") in observed
    await h.close()


class Waits:
    """Asks Permit to wait for it, and records what ran (with Unreserve and PostBind
    failing when ``fail`` is set)."""

    name = "Waits"

    def __init__(self, ran: list[str], fail: bool = False) -> None:
        self.ran, self.fail = ran, fail

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        return Status(Code.WAIT), 30.0

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return Status()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.ran.append(f"unreserve {self.name}")
        if self.fail:
            raise BOOM

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.ran.append(f"postBind {self.name}")
        if self.fail:
            raise BOOM


class AlsoWaits(Waits):
    name = "AlsoWaits"


def _two_plugins(ran: list[str], fail: bool) -> tuple[Harness, list[tuple[str, str, str]]]:
    registry = default_registry()
    for cls in (Waits, AlsoWaits):
        registry.register(
            PluginSpec(cls.name, lambda a, h, cls=cls: cls(ran, fail), None, cls)  # type: ignore[misc]
        )
    plugins: dict[str, Any] = {
        point: {
            "enabled": [{"name": "Waits"}, {"name": "AlsoWaits"}],
            "disabled": [{"name": "*"}],
        }
        for point in ("permit", "reserve", "postBind")
    }
    h = Harness({"profiles": [{"plugins": plugins}]}, registry=registry)
    observed: list[tuple[str, str, str]] = []
    h.wire(Options(observer=lambda pt, pl, code, seconds: observed.append((pt, pl, code))))
    return h, observed


async def test_a_permit_that_waits_is_timed_as_wait_and_the_pod_is_held() -> None:
    h, observed = _two_plugins([], fail=False)
    fwk = h.parts.profiles["troupe-scheduler"]
    info = make_pod().name("p").scheduler_name("troupe-scheduler").info()
    status = fwk.binding.run_permit(CycleState(), info, "n1", h.scheduler.waiting)
    assert status.code is Code.WAIT
    waiting = h.scheduler.waiting.get(info.key)
    assert waiting is not None and waiting.pending_plugins == ["AlsoWaits", "Waits"]
    assert ("Permit", "", "WAIT") in observed
    waiting.reject("Waits", "done")
    await h.close()


@pytest.mark.parametrize("fail", [False, True], ids=["succeeding", "raising"])
async def test_unreserve_runs_in_reverse_and_postbind_in_order_whatever_fails(
    fail: bool,
) -> None:
    ran: list[str] = []
    h, observed = _two_plugins(ran, fail)
    fwk = h.parts.profiles["troupe-scheduler"]
    info = make_pod().name("p").scheduler_name("troupe-scheduler").info()
    fwk.binding.run_unreserve(CycleState(), info, "n1")
    fwk.binding.run_post_bind(CycleState(), info, "n1")
    assert ran == [
        "unreserve AlsoWaits",
        "unreserve Waits",
        "postBind Waits",
        "postBind AlsoWaits",
    ]
    # A failure there cannot fail the point: the pod is past it.
    assert ("Unreserve", "", "SUCCESS") in observed
    assert ("PostBind", "", "SUCCESS") in observed
    await h.close()
