"""troupe.api.config is as strict as kube-scheduler's decoder, and says what was meant:
"did you mean" for a misspelt field or plugin name, one problem per mistake (no
knock-on errors, nothing hidden behind another error), and no value converted where
Go's decoder rejects it (a quoted number, a quoted bool, a fraction for an integer)."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.config import ConfigError, load_config
from troupe.api.config_errors import did_you_mean
from troupe.plugins.registry import catalog, default_registry

from tests.api.config_catalog import config, load, problems_of


def real_problems(raw: dict[str, Any]) -> list[str]:
    """Problems with troupe's own plugins (their real Args models)."""
    with pytest.raises(ConfigError) as info:
        load_config(raw, catalog(default_registry()))
    return info.value.problems


@pytest.mark.parametrize(
    ("name", "known", "hint"),
    [
        pytest.param("CoScheduling", ["Coscheduling", "Other"], ", did you mean 'Coscheduling'?",
                     id="a name differing only in case"),
        pytest.param("NodeResourceFit", ["NodeResourcesFit", "NodeName"],
                     ", did you mean 'NodeResourcesFit'?", id="a letter missing"),
        pytest.param("scor", ["score", "preScore", "filter"], ", did you mean 'score'?",
                     id="a short key"),
        pytest.param("Nope", ["NodeName", "NodePorts"], "", id="nothing close: no guess"),
        pytest.param("x", [], "", id="nothing known"),
    ],
)
def test_did_you_mean_names_the_closest_known_name(name: str, known: list[str], hint: str) -> None:
    assert did_you_mean(name, known) == hint


MISSPELT: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "a plugin name in the wrong case",
        config({"plugins": {"filter": {"enabled": [{"name": "nodeName"}]}}}),
        ["profiles[0].plugins.filter.enabled[0].name: unknown plugin 'nodeName', "
         "did you mean 'NodeName'?"],
    ),
    (
        "a misspelt plugin in pluginConfig",
        config({"pluginConfig": [{"name": "NodeResourceFit", "args": {}}]}),
        ["profiles[0].pluginConfig[0].name: unknown plugin 'NodeResourceFit', "
         "did you mean 'NodeResourcesFit'?"],
    ),
    (
        "a misspelt top-level field",
        config(parallelizm=4),
        ["parallelizm: unknown field, did you mean 'parallelism'?"],
    ),
    (
        "a misspelt nested setting",
        config(leaderElection={"leaseDurration": "15s"}),
        ["leaderElection.leaseDurration: unknown field, did you mean 'leaseDuration'?"],
    ),
    (
        "a misspelt extension point",
        config({"plugins": {"scor": {"enabled": [{"name": "ImageLocality"}]}}}),
        ["profiles[0].plugins.scor: unknown field, did you mean 'score'?"],
    ),
    (
        "a misspelt key of a plugin entry",
        config({"plugins": {"score": {"enabled": [{"name": "ImageLocality", "wieght": 2}]}}}),
        ["profiles[0].plugins.score.enabled[0].wieght: unknown field, did you mean 'weight'?"],
    ),
    (
        "a misspelt field deep in plugin args",
        config({"pluginConfig": [{"name": "NodeResourcesFit",
                                  "args": {"scoringStrategy": {"typ": "MostAllocated"}}}]}),
        ["profiles[0].pluginConfig[0].args.scoringStrategy.typ: unknown field, "
         "did you mean 'type'?"],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [pytest.param(raw, exp, id=case) for case, raw, exp in MISSPELT]
)
def test_a_misspelt_name_is_reported_with_the_name_meant(
    raw: dict[str, Any], expected: list[str]
) -> None:
    assert problems_of(raw) == expected


ONE_MISTAKE: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "the only queue-sort plugin misspelt",
        config({"plugins": {"queueSort": {"enabled": [{"name": "PriortySort"}],
                                          "disabled": [{"name": "*"}]}}}),
        ["profiles[0].plugins.queueSort.enabled[0].name: unknown plugin 'PriortySort', "
         "did you mean 'PrioritySort'?"],
    ),
    (
        "the only bind plugin misspelt",
        config({"plugins": {"bind": {"enabled": [{"name": "CustomBindr"}],
                                     "disabled": [{"name": "*"}]}}}),
        ["profiles[0].plugins.bind.enabled[0].name: unknown plugin 'CustomBindr', "
         "did you mean 'CustomBinder'?"],
    ),
    (
        "a misspelt queue-sort plugin at multiPoint",
        config({"plugins": {"multiPoint": {"enabled": [{"name": "OtherSrt"}],
                                           "disabled": [{"name": "PrioritySort"}]}}}),
        ["profiles[0].plugins.multiPoint.enabled[0].name: unknown plugin 'OtherSrt', "
         "did you mean 'OtherSort'?"],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [pytest.param(raw, exp, id=case) for case, raw, exp in ONE_MISTAKE]
)
def test_one_mistake_is_one_problem(raw: dict[str, Any], expected: list[str]) -> None:
    assert problems_of(raw) == expected


def test_a_bad_weight_does_not_hide_the_profile_s_other_problems() -> None:
    # The string weight is dropped alone: the profile's plugins are still checked.
    raw = config({"plugins": {
        "score": {"enabled": [{"name": "ImageLocality", "weight": "5"}]},
        "filter": {"enabled": [{"name": "NodeNme"}]},
    }})
    assert problems_of(raw) == [
        "profiles[0].plugins.score.enabled[0].weight: must be a valid integer, got '5'",
        "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'NodeNme', "
        "did you mean 'NodeName'?",
    ]


STRICT_SETTINGS: list[tuple[str, dict[str, Any], str]] = [
    ("a quoted weight", config({"plugins": {"score": {"enabled": [
        {"name": "ImageLocality", "weight": "5"}]}}}),
     "profiles[0].plugins.score.enabled[0].weight: must be a valid integer, got '5'"),
    ("a fractional weight", config({"plugins": {"score": {"enabled": [
        {"name": "ImageLocality", "weight": 1.5}]}}}),
     "profiles[0].plugins.score.enabled[0].weight: must be a valid integer, got 1.5"),
    ("a quoted bool", config(leaderElection={"leaderElect": "false"}),
     "leaderElection.leaderElect: must be a valid boolean, got 'false'"),
    ("a number for a duration", config(leaderElection={"leaseDuration": 15}),
     "leaderElection.leaseDuration: must be a duration string such as '15s', got 15"),
    ("a quoted burst", config(clientConnection={"burst": "100"}),
     "clientConnection.burst: must be a valid integer, got '100'"),
    ("a number for a name", config({"schedulerName": 7}),
     "profiles[0].schedulerName: must be a valid string, got 7"),
    ("a quoted int in plugin args", config({"pluginConfig": [
        {"name": "GangPermit", "args": {"permitWaitSeconds": "10"}}]}),
     "profiles[0].pluginConfig[0].args.permitWaitSeconds: must be a valid integer, got '10'"),
    ("a fraction in plugin args", config({"pluginConfig": [
        {"name": "GangPermit", "args": {"permitWaitSeconds": 2.5}}]}),
     "profiles[0].pluginConfig[0].args.permitWaitSeconds: must be a valid integer, got 2.5"),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [pytest.param(raw, exp, id=case) for case, raw, exp in STRICT_SETTINGS]
)
def test_values_go_s_decoder_rejects_are_rejected(raw: dict[str, Any], expected: str) -> None:
    assert problems_of(raw) == [expected]


def test_well_typed_args_still_load() -> None:
    raw = config({
        "plugins": {"permit": {"enabled": [{"name": "GangPermit"}]}},
        "pluginConfig": [{"name": "GangPermit", "args": {"permitWaitSeconds": 10}}],
    })
    assert load(raw).profiles[0].args["GangPermit"].model_dump() == {"permit_wait_seconds": 10}


REAL_ARGS: list[tuple[str, dict[str, Any], str]] = [
    ("Coscheduling's wait as a string",
     {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": "10"}},
     "profiles[0].pluginConfig[0].args.permitWaitingTimeSeconds: must be a valid integer, "
     "got '10'"),
    ("InterPodAffinity's flag as a string",
     {"name": "InterPodAffinity", "args": {"ignorePreferredTermsOfExistingPods": "true"}},
     "profiles[0].pluginConfig[0].args.ignorePreferredTermsOfExistingPods: must be a valid "
     "boolean, got 'true'"),
    ("DefaultPreemption's percentage as a string",
     {"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": "10"}},
     "profiles[0].pluginConfig[0].args.minCandidateNodesPercentage: must be a valid integer, "
     "got '10'"),
    ("a resource weight as a string",
     {"name": "NodeResourcesFit", "args": {"scoringStrategy": {
         "type": "MostAllocated", "resources": [{"name": "cpu", "weight": "2"}]}}},
     "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight: must be a valid "
     "integer, got '2'"),
]


@pytest.mark.parametrize(
    ("entry", "expected"), [pytest.param(e, exp, id=case) for case, e, exp in REAL_ARGS]
)
def test_troupe_s_plugin_args_are_decoded_strictly(entry: dict[str, Any], expected: str) -> None:
    assert real_problems(config({"pluginConfig": [entry]})) == [expected]


def test_nested_objects_in_real_plugin_args_still_load() -> None:
    # Strict decoding reads nested API objects (pydantic dataclasses) from mappings.
    term = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}
    spread = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
    raw = config({"pluginConfig": [
        {"name": "NodeAffinity", "args": {"addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}},
        {"name": "PodTopologySpread", "args": {"defaultConstraints": [spread],
                                                "defaultingType": "List"}},
        {"name": "InterPodAffinity", "args": {"ignorePreferredTermsOfExistingPods": True}},
    ]})
    profile = load_config(raw, catalog(default_registry())).profiles[0]
    assert {"NodeAffinity", "PodTopologySpread", "InterPodAffinity"} <= set(profile.args)
