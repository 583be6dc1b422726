"""For the tests of troupe.api.config: a small plugin catalog standing in for
troupe.plugins, and helpers to build and load configurations."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from troupe.api.config import (
    ConfigError,
    PluginDescriptor,
    ResolvedConfig,
    load_config,
)

# --- a small catalog standing in for troupe.plugins ---------------------------------


class ArgsModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, validate_by_name=True, frozen=True
    )


class ScoringStrategy(ArgsModel):
    type: Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"] = "LeastAllocated"


class FitArgs(ArgsModel):
    scoring_strategy: ScoringStrategy = ScoringStrategy()


class SpreadArgs(ArgsModel):
    defaulting_type: Literal["System", "List"] = "System"


class GangArgs(ArgsModel):
    permit_wait_seconds: int = Field(default=60, gt=0)


class SortArgs(ArgsModel):
    order: Literal["asc", "desc"] = "asc"


class EndpointArgs(ArgsModel):
    endpoint: str


FILTER_SCORE = {"preFilter", "filter", "preScore", "score"}


def _desc(name: str, points: set[str], args: type[BaseModel] | None = None) -> PluginDescriptor:
    return PluginDescriptor(name, args, frozenset(points))


def _default(
    name: str, points: set[str], args: type[BaseModel] | None = None, weight: int = 0
) -> PluginDescriptor:
    return PluginDescriptor(
        name, args, frozenset(points), in_default_profile=True, default_weight=weight
    )


CATALOG = {
    d.name: d
    for d in (
        # Upstream's default set, as troupe.plugins.registry marks it.
        _default("SchedulingGates", {"preEnqueue"}),
        _default("PrioritySort", {"queueSort"}),
        _default("NodeUnschedulable", {"filter"}),
        _default("NodeName", {"filter"}),
        _default("TaintToleration", {"filter", "preScore", "score"}, weight=3),
        _default("NodeAffinity", FILTER_SCORE, weight=2),
        _default("NodePorts", {"preFilter", "filter"}),
        _default("NodeResourcesFit", FILTER_SCORE, FitArgs, weight=1),
        _default("PodTopologySpread", FILTER_SCORE, SpreadArgs, weight=2),
        _default("InterPodAffinity", FILTER_SCORE, weight=2),
        _default("DefaultPreemption", {"postFilter"}),
        _default("NodeResourcesBalancedAllocation", {"preScore", "score"}, weight=1),
        _default("DefaultBinder", {"bind"}),
        _desc(
            "GangPermit",
            {"preEnqueue", "postFilter", "reserve", "permit", "permitDisruption"},
            GangArgs,
        ),
        _desc("OtherSort", {"queueSort"}, SortArgs),
        _desc("ImageLocality", {"score"}),
        _desc("CustomBinder", {"bind"}),
        _desc("RemoteFilter", {"filter"}, EndpointArgs),
    )
}

DEFAULT_FILTER = [
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "PodTopologySpread",
    "InterPodAffinity",
]
DEFAULT_SCORE = [
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodeResourcesFit", 1),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("NodeResourcesBalancedAllocation", 1),
]


def config(*profiles: object, **top: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        **top,
    }
    if profiles:
        raw["profiles"] = list(profiles)
    return raw


def load(raw: dict[str, Any] | str) -> ResolvedConfig:
    return load_config(raw, CATALOG)


def problems_of(raw: dict[str, Any] | str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(raw)
    return info.value.problems


def names(cfg: ResolvedConfig, point: str, profile: int = 0) -> list[str]:
    return list(cfg.profiles[profile].names(point))


def weighted(cfg: ResolvedConfig, point: str = "score") -> list[tuple[str, int]]:
    return [(ref.name, ref.weight) for ref in cfg.profiles[0].points[point]]
