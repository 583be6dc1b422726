"""The plugin registry: every plugin troupe can run, by name.

``troupe.scheduler`` builds a profile's plugins from ``default_registry()`` (plus any
out-of-tree ``PluginSpec`` an embedder registers) and hands ``catalog(registry)`` to
``troupe.api.config`` so a profile can be validated without the config layer
importing plugins. Which extension points a plugin serves is read from the classes
themselves, through the runtime-checkable Protocols of ``troupe.api.framework``.

The registry is also where the default profile is decided: a spec says whether its
plugin is in the default multiPoint set and with which score weight, and the set
keeps the registry's order (upstream ``apis/config/v1/default_plugins.go``). A new
plugin therefore costs its package, its entry here and its tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from pydantic import BaseModel

from troupe.api.config import PluginDescriptor
from troupe.api.framework import (
    BindPlugin,
    FilterPlugin,
    Handle,
    PermitDisruptionPlugin,
    PermitPlugin,
    PlacementFeasiblePlugin,
    PlacementGeneratePlugin,
    PlacementScorePlugin,
    PodGroupPostFilterPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)

PluginFactory = Callable[[BaseModel | None, Handle], object]

# Config names of the extension points, in the order a pod meets them.
_EXTENSION_POINTS: tuple[tuple[str, type], ...] = (
    ("preEnqueue", PreEnqueuePlugin),
    ("queueSort", QueueSortPlugin),
    ("preFilter", PreFilterPlugin),
    ("filter", FilterPlugin),
    ("postFilter", PostFilterPlugin),
    ("podGroupPostFilter", PodGroupPostFilterPlugin),
    ("preScore", PreScorePlugin),
    ("score", ScorePlugin),
    ("placementGenerate", PlacementGeneratePlugin),
    ("placementScore", PlacementScorePlugin),
    ("placementFeasible", PlacementFeasiblePlugin),
    ("reserve", ReservePlugin),
    ("permit", PermitPlugin),
    ("permitDisruption", PermitDisruptionPlugin),
    ("preBind", PreBindPlugin),
    ("bind", BindPlugin),
    ("postBind", PostBindPlugin),
)


def extension_points_of(plugin_class: type) -> frozenset[str]:
    """The camelCase extension points ``plugin_class`` implements (e.g. ``filter``)."""
    return frozenset(point for point, proto in _EXTENSION_POINTS if issubclass(plugin_class, proto))


@dataclass(frozen=True, slots=True)
class PluginSpec:
    """How to build one plugin: ``factory(validated args or None, handle)``, and
    whether the default profile enables it at every point it implements, with which
    score weight (0: unset, which scores as 1)."""

    name: str
    factory: PluginFactory
    args_model: type[BaseModel] | None
    plugin_class: type
    in_default_profile: bool = False
    default_weight: int = 0


def plugin_spec(
    plugin_class: type,
    args_model: type[BaseModel] | None = None,
    *,
    in_default_profile: bool = False,
    default_weight: int = 0,
) -> PluginSpec:
    """A spec for a plugin class following the convention: a ``name`` class attribute
    and ``__init__(self, args: <args_model> | None, handle: Handle)``."""
    name = getattr(plugin_class, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{plugin_class.__qualname__} has no 'name' class attribute")

    def factory(args: BaseModel | None, handle: Handle) -> object:
        if args is not None and (args_model is None or not isinstance(args, args_model)):
            expected = args_model.__name__ if args_model is not None else "no args"
            raise TypeError(f"plugin {name!r} takes {expected}, got {type(args).__name__}")
        return plugin_class(args, handle)

    return PluginSpec(name, factory, args_model, plugin_class, in_default_profile, default_weight)


class Registry:
    """Plugin specs by name, in registration order."""

    def __init__(self, specs: Iterable[PluginSpec] = ()) -> None:
        self._specs: dict[str, PluginSpec] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: PluginSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"a plugin named {spec.name!r} is already registered")
        self._specs[spec.name] = spec

    def get(self, name: str) -> PluginSpec | None:
        return self._specs.get(name)

    def __getitem__(self, name: str) -> PluginSpec:
        spec = self._specs.get(name)
        if spec is None:
            known = ", ".join(self._specs)
            raise KeyError(f"no plugin named {name!r} is registered (known: {known})")
        return spec

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[PluginSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)


def catalog(registry: Registry) -> dict[str, PluginDescriptor]:
    """What ``troupe.api.config`` needs to validate profiles against ``registry`` and to
    build its default profile, in registry order."""
    return {
        spec.name: PluginDescriptor(
            spec.name,
            spec.args_model,
            extension_points_of(spec.plugin_class),
            in_default_profile=spec.in_default_profile,
            default_weight=spec.default_weight,
        )
        for spec in registry
    }


def default_registry() -> Registry:
    """Every built-in plugin (upstream ``NewInTreeRegistry``)."""
    # Imported here so that importing the registry module stays cheap and a plugin
    # package can never import the registry back.
    from troupe.plugins.coscheduling import Coscheduling, CoschedulingArgs
    from troupe.plugins.defaultbinder import DefaultBinder
    from troupe.plugins.defaultpreemption import DefaultPreemption, DefaultPreemptionArgs
    from troupe.plugins.gangscheduling import GangScheduling
    from troupe.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
    from troupe.plugins.nodeaffinity import NodeAffinity, NodeAffinityArgs
    from troupe.plugins.nodename import NodeName
    from troupe.plugins.nodeports import NodePorts
    from troupe.plugins.noderesources import (
        BalancedAllocation,
        Fit,
        NodeResourcesBalancedAllocationArgs,
        NodeResourcesFitArgs,
    )
    from troupe.plugins.nodeunschedulable import NodeUnschedulable
    from troupe.plugins.podgrouppodscount import PodGroupPodsCount
    from troupe.plugins.podtopologyspread import PodTopologySpread, PodTopologySpreadArgs
    from troupe.plugins.prioritysort import PrioritySort
    from troupe.plugins.schedulinggates import SchedulingGates
    from troupe.plugins.tainttoleration import TaintToleration
    from troupe.plugins.topologyplacement import TopologyPlacement, TopologyPlacementArgs

    def default(
        plugin_class: type, args_model: type[BaseModel] | None = None, weight: int = 0
    ) -> PluginSpec:
        return plugin_spec(plugin_class, args_model, in_default_profile=True, default_weight=weight)

    return Registry(
        [
            # Upstream's default multiPoint set, in its order, with its score weights
            # (less the volume plugins and ImageLocality, which troupe does not have).
            default(SchedulingGates),
            default(PrioritySort),
            default(NodeUnschedulable),
            default(NodeName),
            default(TaintToleration, weight=3),
            default(NodeAffinity, NodeAffinityArgs, weight=2),
            default(NodePorts),
            default(Fit, NodeResourcesFitArgs, weight=1),
            default(PodTopologySpread, PodTopologySpreadArgs, weight=2),
            default(InterPodAffinity, InterPodAffinityArgs, weight=2),
            default(DefaultPreemption, DefaultPreemptionArgs),
            default(BalancedAllocation, NodeResourcesBalancedAllocationArgs, weight=1),
            default(DefaultBinder),
            # KEP-5732: topology-aware placement of pod groups (placementGenerate,
            # placementScore with NodeResourcesFit, placementFeasible).
            default(TopologyPlacement, TopologyPlacementArgs),
            default(PodGroupPodsCount, weight=1),
            default(GangScheduling),
            # Not in the default profile: scheduler-plugins' algorithm, for profiles
            # moved over unchanged (docs/migrating-from-coscheduling.md).
            plugin_spec(Coscheduling, CoschedulingArgs),
        ]
    )
