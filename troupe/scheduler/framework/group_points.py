"""The runners of the points a pod group meets as a whole (KEP-5732 placements,
KEP-5710 PodGroupPostFilter), through the one runner shape of
``troupe.scheduler.framework.runners``: timed per point, and per plugin on sampled
group attempts (``state``: the group attempt's state).

``Framework`` (``troupe.scheduler.framework.runtime``) composes one ``GroupRunners``
over its sorted plugins; the group cycle calls them as ``fwk.group``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from troupe.api.cycle import CycleState
from troupe.api.framework import (
    DisruptionPlan,
    GroupEvaluation,
    GroupPreemptor,
    PlacementAssignment,
    PlacementScoreExtensions,
    PlacementScorePlugin,
    PodGroupPostFilterPlugin,
)
from troupe.api.nodetable import NodeTable
from troupe.api.status import SUCCESS, Code, Status
from troupe.scheduler.framework import runners
from troupe.scheduler.framework.instrument import Observer
from troupe.scheduler.framework.points import PointPlugins


class GroupRunners:
    """The pod-group points over one profile's plugins."""

    __slots__ = ("_normalizers", "_observe", "_points")

    def __init__(
        self,
        points: PointPlugins,
        normalizers: Mapping[str, PlacementScoreExtensions],
        observe: Observer,
    ) -> None:
        self._points = points
        self._normalizers = normalizers
        self._observe = observe

    def run_pod_group_post_filter(
        self,
        preemptor: GroupPreemptor,
        evaluate: Callable[[], GroupEvaluation],
        state: CycleState | None = None,
    ) -> tuple[DisruptionPlan | None, Status]:
        """The first PodGroupPostFilter plugin's plan (upstream runs only one)."""
        plans: list[DisruptionPlan | None] = []

        def post_filter(_: str, plugin: PodGroupPostFilterPlugin) -> Status:
            plan, status = plugin.pod_group_post_filter(preemptor, evaluate)
            plans.append(plan)
            return status

        status = runners.run(
            self._observe,
            runners.POD_GROUP_POST_FILTER,
            self._points.pod_group_post_filter,
            state,
            post_filter,
        )
        plan = plans[-1] if plans and status.code is not Code.ERROR else None
        return plan, status

    def run_placement_score(
        self,
        table: NodeTable,
        assignments: Sequence[PlacementAssignment],
        state: CycleState | None = None,
    ) -> tuple[list[int], Status]:
        """Every candidate's weighted total over the placementScore plugins, each
        plugin's scores normalized over the candidates first."""
        totals = [0] * len(assignments)
        weights = {name: weight for name, _, weight in self._points.placement_score}

        def score(name: str, plugin: PlacementScorePlugin) -> Status:
            scores = [plugin.score_placement(table, a) for a in assignments]
            normalizer = self._normalizers.get(name)
            status = normalizer.normalize_placement_score(scores) if normalizer else SUCCESS
            if status.is_success:
                for i, value in enumerate(scores):
                    totals[i] += value * weights[name]
            return status

        plugins = [(name, plugin) for name, plugin, _ in self._points.placement_score]
        status = runners.run(self._observe, runners.PLACEMENT_SCORE, plugins, state, score)
        return totals, status

    def run_placement_feasible(
        self, min_count: int, scheduled: int, remaining: int, state: CycleState | None = None
    ) -> Status:
        """The first non-success of the placementFeasible plugins (Wait: not yet)."""
        return runners.run(
            self._observe,
            runners.PLACEMENT_FEASIBLE,
            self._points.placement_feasible,
            state,
            lambda _, p: p.placement_feasible(min_count, scheduled, remaining),
        )
