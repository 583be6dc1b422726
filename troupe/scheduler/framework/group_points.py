"""The extension points a pod group meets as a whole (KEP-5732 placements, KEP-5710
PodGroupPostFilter), run by ``Framework`` (``troupe.scheduler.framework.runtime``),
which builds the plugin lists this mixin reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from troupe.api.framework import (
    DisruptionPlan,
    GroupEvaluation,
    GroupPreemptor,
    PlacementAssignment,
    PlacementFeasiblePlugin,
    PlacementScoreExtensions,
    PlacementScorePlugin,
    PodGroupPostFilterPlugin,
)
from troupe.api.nodetable import NodeTable
from troupe.api.status import SUCCESS, Code, Status
from troupe.scheduler.framework.instrument import plugin_error, plugin_failure


class GroupPoints:
    """Runners of the pod-group points over the profile's plugins."""

    pod_group_post_filter: list[tuple[str, PodGroupPostFilterPlugin]]
    placement_score: list[tuple[str, PlacementScorePlugin, int]]
    placement_feasible: list[tuple[str, PlacementFeasiblePlugin]]
    _placement_normalizers: dict[str, PlacementScoreExtensions]

    def run_pod_group_post_filter(
        self, preemptor: GroupPreemptor, evaluate: Callable[[], GroupEvaluation]
    ) -> tuple[DisruptionPlan | None, Status]:
        """The first PodGroupPostFilter plugin's plan (upstream runs only one)."""
        for name, plugin in self.pod_group_post_filter:
            try:
                plan, status = plugin.pod_group_post_filter(preemptor, evaluate)
            except Exception as exc:
                return None, plugin_error(name, "podGroupPostFilter", exc)
            if status.code is Code.ERROR:
                return None, plugin_failure(name, "podGroupPostFilter", status)
            return plan, status.stamped(name)
        return None, Status.unschedulable("no PodGroupPostFilter plugin is enabled")

    # --- placements (KEP-5732) --------------------------------------------------------

    def run_placement_score(
        self, table: NodeTable, assignments: Sequence[PlacementAssignment]
    ) -> tuple[list[int], Status]:
        """Every candidate's weighted total over the placementScore plugins, each
        plugin's scores normalized over the candidates first."""
        totals = [0] * len(assignments)
        for name, plugin, weight in self.placement_score:
            try:
                scores = [plugin.score_placement(table, a) for a in assignments]
                status = SUCCESS
                normalizer = self._placement_normalizers.get(name)
                if normalizer is not None:
                    status = normalizer.normalize_placement_score(scores)
            except Exception as exc:
                return totals, plugin_error(name, "placementScore", exc)
            if not status.is_success:
                return totals, plugin_failure(name, "placementScore", status)
            for i, score in enumerate(scores):
                totals[i] += score * weight
        return totals, SUCCESS

    def run_placement_feasible(self, min_count: int, scheduled: int, remaining: int) -> Status:
        """The first non-success of the placementFeasible plugins (Wait: not yet)."""
        for name, plugin in self.placement_feasible:
            status = plugin.placement_feasible(min_count, scheduled, remaining)
            if not status.is_success:
                return status.stamped(name)
        return SUCCESS
