"""The registry: default plugins, extension points read from the classes, the catalog."""

from __future__ import annotations

import numpy as np
import pytest
from troupe.api.config import PluginRef, default_plugin_set, load_config
from troupe.api.cycle import CycleState
from troupe.api.framework import EnqueueExtensions, FilterPlugin, Handle, PreEnqueuePlugin
from troupe.api.nodetable import IndexArray, IntArray, NodeTable
from troupe.api.podinfo import PodInfo
from troupe.plugins.nodeaffinity import NodeAffinityArgs
from troupe.plugins.noderesources import Fit, NodeResourcesFitArgs
from troupe.plugins.nodeunschedulable import NodeUnschedulable
from troupe.plugins.registry import (
    Registry,
    catalog,
    default_registry,
    extension_points_of,
    plugin_spec,
)
from troupe.plugins.schedulinggates import SchedulingGates

from tests.plugins.fakes import FakeHandle

MINIMAL_CONFIG = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

# Upstream's default multiPoint set (apis/config/v1/default_plugins.go) less the volume
# plugins and ImageLocality, in its order, with its score weights (0: none given).
UPSTREAM_DEFAULT_MULTIPOINT = (
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("DefaultBinder", 0),
    # Kubernetes 1.37's workload plugins at the placement points (KEP-5732).
    ("TopologyPlacement", 0),
    ("PodGroupPodsCount", 1),
    ("GangScheduling", 0),
)

# Default plugins that score placements only, not nodes.
PLACEMENT_ONLY = {"PodGroupPodsCount"}


class ImageLocality:
    """An out-of-tree scorer, registered the way an embedder would."""

    name = "ImageLocality"

    def __init__(self, args: None, handle: Handle) -> None:
        del args, handle

    def score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> IntArray:
        return np.zeros(len(slots), dtype=np.int64)


def test_the_default_registry_holds_every_default_plugin_and_coscheduling() -> None:
    assert set(default_registry().names()) == {name for name, _ in UPSTREAM_DEFAULT_MULTIPOINT} | {
        "Coscheduling"
    }


def test_the_default_profile_of_the_default_registry_is_upstreams() -> None:
    cat = catalog(default_registry())
    assert default_plugin_set(cat) == UPSTREAM_DEFAULT_MULTIPOINT
    profile = load_config(MINIMAL_CONFIG, cat).profiles[0]
    assert set(profile.enabled) == {name for name, _ in UPSTREAM_DEFAULT_MULTIPOINT}
    assert profile.points["score"] == tuple(
        PluginRef(name, weight)
        for name, weight in UPSTREAM_DEFAULT_MULTIPOINT
        if weight
        if name not in PLACEMENT_ONLY
    )
    # Placements are scored by PodGroupPodsCount and NodeResourcesFit, 1:1 (KEP-5732).
    assert profile.points["placementScore"] == (
        PluginRef("NodeResourcesFit", 1),
        PluginRef("PodGroupPodsCount", 1),
    )
    assert profile.names("placementGenerate") == ("TopologyPlacement",)
    assert profile.names("placementFeasible") == ("GangScheduling",)


@pytest.mark.parametrize(
    ("before", "expected_score"),
    [
        pytest.param(
            None,
            [
                *(n for n, w in UPSTREAM_DEFAULT_MULTIPOINT if w and n not in PLACEMENT_ONLY),
                "ImageLocality",
            ],
            id="registered last it scores last",
        ),
        pytest.param(
            "NodeResourcesFit",
            [
                "TaintToleration",
                "NodeAffinity",
                "ImageLocality",
                "NodeResourcesFit",
                "PodTopologySpread",
                "InterPodAffinity",
                "NodeResourcesBalancedAllocation",
            ],
            id="registered before NodeResourcesFit it scores before it",
        ),
    ],
)
def test_an_out_of_tree_plugin_with_a_default_weight_joins_the_default_profile(
    before: str | None, expected_score: list[str]
) -> None:
    locality = plugin_spec(ImageLocality, in_default_profile=True, default_weight=4)
    if before is None:
        registry = default_registry()
        registry.register(locality)
    else:
        specs = list(default_registry())
        at = [s.name for s in specs].index(before)
        registry = Registry([*specs[:at], locality, *specs[at:]])
    profile = load_config(MINIMAL_CONFIG, catalog(registry)).profiles[0]
    assert profile.names("score") == tuple(expected_score)
    assert PluginRef("ImageLocality", 4) in profile.points["score"]
    assert "ImageLocality" in profile.enabled


def test_every_default_plugin_builds_with_default_args_and_carries_its_name() -> None:
    handle = FakeHandle()
    for spec in default_registry():
        args = spec.args_model.model_validate({}) if spec.args_model else None
        plugin = spec.factory(args, handle)
        assert getattr(plugin, "name", None) == spec.name
        assert isinstance(plugin, spec.plugin_class)


def test_every_plugin_that_can_reject_says_which_events_may_help() -> None:
    for spec in default_registry():
        if issubclass(spec.plugin_class, FilterPlugin | PreEnqueuePlugin):
            assert issubclass(spec.plugin_class, EnqueueExtensions), spec.name


@pytest.mark.parametrize(
    ("plugin_class", "points"),
    [
        pytest.param(SchedulingGates, {"preEnqueue"}, id="a pre-enqueue plugin"),
        pytest.param(NodeUnschedulable, {"preFilter", "filter"}, id="a filter plugin"),
        pytest.param(
            Fit,
            {"preFilter", "filter", "preScore", "score", "placementScore"},
            id="filter and score",
        ),
    ],
)
def test_extension_points_are_read_from_the_class(plugin_class: type, points: set[str]) -> None:
    assert extension_points_of(plugin_class) == points


def test_the_catalog_resolves_the_upstream_default_profile() -> None:
    config = load_config(MINIMAL_CONFIG, catalog(default_registry()))
    profile = config.profiles[0]
    assert profile.names("filter") == (
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
    )
    assert profile.names("bind") == ("DefaultBinder",)
    assert isinstance(profile.args["NodeResourcesFit"], NodeResourcesFitArgs)


def test_plugin_args_from_a_profile_are_validated_by_the_plugin_model() -> None:
    text = MINIMAL_CONFIG + (
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n"
        "    args: {scoringStrategy: {type: Spread}}\n"
    )
    with pytest.raises(ValueError, match=r"scoringStrategy\.type"):
        load_config(text, catalog(default_registry()))


def test_registering_a_name_twice_fails() -> None:
    registry = Registry([plugin_spec(SchedulingGates)])
    with pytest.raises(ValueError, match="'SchedulingGates' is already registered"):
        registry.register(plugin_spec(SchedulingGates))
    assert "SchedulingGates" in registry and registry.get("Nope") is None
    with pytest.raises(KeyError, match="no plugin named 'Nope'"):
        registry["Nope"]


def test_a_factory_refuses_args_of_another_plugin() -> None:
    spec = plugin_spec(Fit, NodeResourcesFitArgs)
    with pytest.raises(TypeError, match="takes NodeResourcesFitArgs"):
        spec.factory(NodeAffinityArgs(), FakeHandle())
    no_args = plugin_spec(SchedulingGates)
    with pytest.raises(TypeError, match="takes no args"):
        no_args.factory(NodeResourcesFitArgs(), FakeHandle())


def test_a_class_without_a_name_cannot_be_registered() -> None:
    class Nameless:
        pass

    with pytest.raises(ValueError, match="has no 'name' class attribute"):
        plugin_spec(Nameless)
