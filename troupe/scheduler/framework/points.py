"""One profile's plugins sorted into the extension points they run at, read once.

``Framework`` (``troupe.scheduler.framework.runtime``) builds the plugins, then
``sort_plugins`` checks each against the Protocol of every point the profile puts
it at (a clear error naming the plugin and the point otherwise) and decides, once,
everything the runners would otherwise ask per cycle: which scorers normalize,
which placement generator gives a group's levels, each plugin's declared traits,
queueing hints and the API objects it watches (``WatchesObjects``). Protocol
``isinstance`` checks are slow, so none is left for a cycle to make. Upstream does
the same when it builds ``frameworkImpl``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from troupe.api.config import PluginRef
from troupe.api.events import ClusterEventWithHint
from troupe.api.framework import (
    BindPlugin,
    CapacityResources,
    EnqueueExtensions,
    FilterPlugin,
    PermitDisruptionPlugin,
    PermitPlugin,
    PlacementFeasiblePlugin,
    PlacementGeneratePlugin,
    PlacementLevels,
    PlacementScoreExtensions,
    PlacementScorePlugin,
    PluginTraits,
    PodGroupPostFilterPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
    traits_of,
)
from troupe.api.watches import ObjectWatch, WatchesObjects

P = TypeVar("P")
Named = list[tuple[str, P]]
Weighted = list[tuple[str, P, int]]


@dataclass(frozen=True, slots=True)
class PointPlugins:
    """Each extension point's plugins, in profile order (``(name, plugin)``; scorers
    with their weight)."""

    pre_enqueue: Named[PreEnqueuePlugin]
    queue_sort: QueueSortPlugin | None
    pre_filter: Named[PreFilterPlugin]
    filter: Named[FilterPlugin]
    post_filter: Named[PostFilterPlugin]
    pre_score: Named[PreScorePlugin]
    score: Weighted[ScorePlugin]
    reserve: Named[ReservePlugin]
    permit: Named[PermitPlugin]
    permit_disruption: Named[PermitDisruptionPlugin]
    pre_bind: Named[PreBindPlugin]
    bind: Named[BindPlugin]
    post_bind: Named[PostBindPlugin]
    pod_group_post_filter: Named[PodGroupPostFilterPlugin]
    placement_generate: Named[PlacementGeneratePlugin]
    placement_score: Weighted[PlacementScorePlugin]
    placement_feasible: Named[PlacementFeasiblePlugin]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the plugins declare beyond their points, decided once per profile."""

    traits: Mapping[str, PluginTraits]
    normalizers: Mapping[str, ScoreExtensions]
    placement_normalizers: Mapping[str, PlacementScoreExtensions]
    placement_levels: PlacementLevels | None
    # PreFilter plugins that keep per-pod state preemption must update (AddPod and
    # RemovePod, upstream PreFilterExtensions).
    pre_filter_extensions: Named[PreFilterExtensions]
    capacity_resources: list[CapacityResources]
    queueing_hints: list[tuple[str, Sequence[ClusterEventWithHint]]]
    # The API objects plugins watch (``troupe.api.watches``), by plugin name.
    object_watches: list[tuple[str, ObjectWatch[Any]]]


def sort_plugins(
    points: Mapping[str, Sequence[PluginRef]], plugins: Mapping[str, object]
) -> PointPlugins:
    """Every point's plugins, each checked against that point's Protocol."""

    def at(point: str, as_point: Callable[[object], P | None]) -> Named[P]:
        return [
            (ref.name, _checked(ref.name, point, plugins, as_point))
            for ref in points.get(point, ())
        ]

    def weighted(point: str, as_point: Callable[[object], P | None]) -> Weighted[P]:
        return [
            (ref.name, _checked(ref.name, point, plugins, as_point), ref.weight)
            for ref in points.get(point, ())
        ]

    sorts = at("queueSort", lambda p: p if isinstance(p, QueueSortPlugin) else None)
    return PointPlugins(
        pre_enqueue=at("preEnqueue", lambda p: p if isinstance(p, PreEnqueuePlugin) else None),
        queue_sort=sorts[0][1] if sorts else None,
        pre_filter=at("preFilter", lambda p: p if isinstance(p, PreFilterPlugin) else None),
        filter=at("filter", lambda p: p if isinstance(p, FilterPlugin) else None),
        post_filter=at("postFilter", lambda p: p if isinstance(p, PostFilterPlugin) else None),
        pre_score=at("preScore", lambda p: p if isinstance(p, PreScorePlugin) else None),
        score=weighted("score", lambda p: p if isinstance(p, ScorePlugin) else None),
        reserve=at("reserve", lambda p: p if isinstance(p, ReservePlugin) else None),
        permit=at("permit", lambda p: p if isinstance(p, PermitPlugin) else None),
        permit_disruption=at(
            "permitDisruption", lambda p: p if isinstance(p, PermitDisruptionPlugin) else None
        ),
        pre_bind=at("preBind", lambda p: p if isinstance(p, PreBindPlugin) else None),
        bind=at("bind", lambda p: p if isinstance(p, BindPlugin) else None),
        post_bind=at("postBind", lambda p: p if isinstance(p, PostBindPlugin) else None),
        pod_group_post_filter=at(
            "podGroupPostFilter",
            lambda p: p if isinstance(p, PodGroupPostFilterPlugin) else None,
        ),
        placement_generate=at(
            "placementGenerate", lambda p: p if isinstance(p, PlacementGeneratePlugin) else None
        ),
        placement_score=weighted(
            "placementScore", lambda p: p if isinstance(p, PlacementScorePlugin) else None
        ),
        placement_feasible=at(
            "placementFeasible", lambda p: p if isinstance(p, PlacementFeasiblePlugin) else None
        ),
    )


def capabilities(points: PointPlugins, plugins: Mapping[str, object]) -> Capabilities:
    """What the profile's plugins declare, decided once."""
    return Capabilities(
        traits={name: traits_of(plugin) for name, plugin in plugins.items()},
        normalizers={n: p for n, p, _ in points.score if isinstance(p, ScoreExtensions)},
        placement_normalizers={
            n: p for n, p, _ in points.placement_score if isinstance(p, PlacementScoreExtensions)
        },
        placement_levels=next(
            (p for _, p in points.placement_generate if isinstance(p, PlacementLevels)), None
        ),
        pre_filter_extensions=[
            (n, p) for n, p in points.pre_filter if isinstance(p, PreFilterExtensions)
        ],
        capacity_resources=[p for _, p in points.filter if isinstance(p, CapacityResources)],
        queueing_hints=[
            (name, plugin.events_to_register())
            for name, plugin in plugins.items()
            if isinstance(plugin, EnqueueExtensions)
        ],
        object_watches=[
            (name, watch)
            for name, plugin in plugins.items()
            if isinstance(plugin, WatchesObjects)
            for watch in plugin.watched_objects()
        ],
    )


def _checked(
    name: str, point: str, plugins: Mapping[str, object], as_point: Callable[[object], P | None]
) -> P:
    plugin = as_point(plugins[name])
    if plugin is None:
        raise TypeError(f"plugin {name!r} does not implement {point}")
    return plugin
