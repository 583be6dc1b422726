"""troupe.api.config: a bad configuration is reported with the exact path of each problem."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.config import (
    ConfigError,
    PluginDescriptor,
    load_config,
)

from tests.api.config_catalog import (
    CATALOG,
    config,
    load,
    problems_of,
)

# --- problems --------------------------------------------------------------------------


def two_queue_sorts() -> dict[str, Any]:
    return {"schedulerName": "b", "plugins": {"queueSort": {"enabled": [{"name": "OtherSort"}]}}}


BAD_CASES: list[tuple[str, dict[str, Any] | str, list[str]]] = [
    ("an unknown top-level key", config(foo=1), ["foo: unknown field"]),
    (
        "an older apiVersion",
        {**config(), "apiVersion": "kubescheduler.config.k8s.io/v1beta3"},
        [
            "apiVersion: 'kubescheduler.config.k8s.io/v1beta3' is not one of "
            "['kubescheduler.config.k8s.io/v1']"
        ],
    ),
    (
        "a missing kind",
        {"apiVersion": "kubescheduler.config.k8s.io/v1"},
        ["kind: required field"],
    ),
    ("zero parallelism", config(parallelism=0), ["parallelism: must be greater than 0, got 0"]),
    (
        "a quoted number",
        config(parallelism="16"),
        ["parallelism: must be a valid integer, got '16'"],
    ),
    (
        "a percentage over 100",
        config(percentageOfNodesToScore=101),
        ["percentageOfNodesToScore: must be less than or equal to 100, got 101"],
    ),
    (
        "a max backoff below the initial one",
        config(podInitialBackoffSeconds=5, podMaxBackoffSeconds=2),
        ["podMaxBackoffSeconds: must be >= podInitialBackoffSeconds (5), got 2"],
    ),
    (
        "a binding concurrency ceiling below its floor",
        config(bindingConcurrency=64, maxBindingConcurrency=32),
        ["maxBindingConcurrency: must be >= bindingConcurrency (64), got 32"],
    ),
    (
        "a renew deadline not shorter than the lease",
        config(leaderElection={"renewDeadline": "20s"}),
        ["leaderElection.renewDeadline: must be less than leaseDuration (15s), got 20s"],
    ),
    (
        "a renew deadline with no room for a retry",
        config(leaderElection={"renewDeadline": "2s"}),
        ["leaderElection.renewDeadline: must be greater than 1.2 * retryPeriod (2.4s), got 2s"],
    ),
    (
        "a malformed duration",
        config(leaderElection={"leaseDuration": "15 seconds"}),
        [
            "leaderElection.leaseDuration: invalid duration '15 seconds', "
            "expected e.g. '15s', '1m30s', '500ms'"
        ],
    ),
    (
        "a duration given as a bare number",
        config(leaderElection={"retryPeriod": 2}),
        ["leaderElection.retryPeriod: must be a duration string such as '15s', got 2"],
    ),
    (
        "a lock other than leases",
        config(leaderElection={"resourceLock": "endpoints"}),
        ["leaderElection.resourceLock: must be 'leases', got 'endpoints'"],
    ),
    (
        "a negative burst",
        config(clientConnection={"burst": -1}),
        ["clientConnection.burst: must be greater than or equal to 0, got -1"],
    ),
    (
        "profiles that are not a list",
        config(profiles={"schedulerName": "x"}),
        ["profiles: must be a list, got dict"],
    ),
    (
        "a misspelt profile key",
        config({"plugin": {}}),
        ["profiles[0].plugin: unknown field, did you mean 'plugins'?"],
    ),
    (
        "a negative profile percentage",
        config({"percentageOfNodesToScore": -1}),
        ["profiles[0].percentageOfNodesToScore: must be greater than or equal to 0, got -1"],
    ),
    (
        "a misspelt plugin name",
        config(
            {
                "plugins": {
                    "filter": {
                        "enabled": [
                            {"name": "NodeName"},
                            {"name": "NodePorts"},
                            {"name": "NodeResourcesFitt"},
                        ]
                    }
                }
            }
        ),
        [
            "profiles[0].plugins.filter.enabled[2].name: unknown plugin 'NodeResourcesFitt', "
            "did you mean 'NodeResourcesFit'?"
        ],
    ),
    (
        "an unknown multiPoint plugin",
        config({"plugins": {"multiPoint": {"enabled": [{"name": "Nope"}]}}}),
        ["profiles[0].plugins.multiPoint.enabled[0].name: unknown plugin 'Nope'"],
    ),
    (
        "a plugin at a point it does not implement",
        config({"plugins": {"filter": {"enabled": [{"name": "PrioritySort"}]}}}),
        [
            "profiles[0].plugins.filter.enabled[0].name: "
            "plugin 'PrioritySort' does not implement filter"
        ],
    ),
    (
        "a zero score weight",
        config({"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 0}]}}}),
        ["profiles[0].plugins.score.enabled[0].weight: must be a positive integer, got 0"],
    ),
    (
        "a weight that is not a number",
        config({"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": "high"}]}}}),
        ["profiles[0].plugins.score.enabled[0].weight: must be a valid integer, got 'high'"],
    ),
    (
        "args that are not a mapping",
        config({"pluginConfig": [{"name": "NodeResourcesFit", "args": "x"}]}),
        ["profiles[0].pluginConfig[0].args: must be a mapping, got 'x'"],
    ),
    (
        "a plugin enabled twice at one point",
        config({"plugins": {"filter": {"enabled": [{"name": "NodeName"}, {"name": "NodeName"}]}}}),
        ["profiles[0].plugins.filter.enabled[1].name: plugin 'NodeName' is enabled more than once"],
    ),
    (
        "two queue-sort plugins in one profile",
        config({"schedulerName": "a"}, two_queue_sorts()),
        [
            "profiles[1].plugins.queueSort: only one queue-sort plugin may be enabled, "
            "found ['PrioritySort', 'OtherSort']"
        ],
    ),
    (
        "no queue-sort plugin",
        config({"plugins": {"multiPoint": {"disabled": [{"name": "PrioritySort"}]}}}),
        ["profiles[0].plugins.queueSort: exactly one queue-sort plugin is required"],
    ),
    (
        "no bind plugin",
        config({"plugins": {"bind": {"disabled": [{"name": "*"}]}}}),
        ["profiles[0].plugins.bind: at least one bind plugin is required"],
    ),
    (
        "a queue-sort plugin that differs between profiles",
        config(
            {"schedulerName": "a"},
            {
                "schedulerName": "b",
                "plugins": {
                    "queueSort": {"disabled": [{"name": "*"}], "enabled": [{"name": "OtherSort"}]}
                },
            },
        ),
        [
            "profiles[1].plugins.queueSort: must be the same for all profiles, "
            "got 'OtherSort' but profiles[0] uses 'PrioritySort'"
        ],
    ),
    (
        "queue-sort args that differ between profiles",
        config(
            *(
                {
                    "schedulerName": name,
                    "plugins": {
                        "queueSort": {
                            "disabled": [{"name": "*"}],
                            "enabled": [{"name": "OtherSort"}],
                        }
                    },
                    "pluginConfig": [{"name": "OtherSort", "args": {"order": order}}],
                }
                for name, order in (("a", "asc"), ("b", "desc"))
            )
        ),
        [
            "profiles[1].pluginConfig: args of queue-sort plugin 'OtherSort' "
            "must be the same for all profiles"
        ],
    ),
    (
        "args for an unknown plugin",
        config({"pluginConfig": [{"name": "Nope", "args": {}}]}),
        ["profiles[0].pluginConfig[0].name: unknown plugin 'Nope'"],
    ),
    (
        "two pluginConfig entries for one plugin",
        config(
            {
                "pluginConfig": [
                    {"name": "NodeResourcesFit", "args": {}},
                    {"name": "NodeResourcesFit", "args": {}},
                ]
            }
        ),
        [
            "profiles[0].pluginConfig[1].name: duplicate pluginConfig for plugin "
            "'NodeResourcesFit', first at pluginConfig[0]"
        ],
    ),
    (
        "a scoring strategy that does not exist",
        config(
            {
                "pluginConfig": [
                    {"name": "PodTopologySpread", "args": {"defaultingType": "List"}},
                    {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Most"}}},
                ]
            }
        ),
        [
            "profiles[0].pluginConfig[1].args.scoringStrategy.type: 'Most' is not one of "
            "['LeastAllocated', 'MostAllocated', 'RequestedToCapacityRatio']"
        ],
    ),
    (
        "an unknown args field",
        config({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategyy": {}}}]}),
        [
            "profiles[0].pluginConfig[0].args.scoringStrategyy: unknown field, "
            "did you mean 'scoringStrategy'?"
        ],
    ),
    (
        "args tagged with another plugin's kind",
        config(
            {
                "pluginConfig": [
                    {"name": "NodeResourcesFit", "args": {"kind": "PodTopologySpreadArgs"}}
                ]
            }
        ),
        [
            "profiles[0].pluginConfig[0].args.kind: must be 'NodeResourcesFitArgs', "
            "got 'PodTopologySpreadArgs'"
        ],
    ),
    (
        "args for a plugin that takes none",
        config({"pluginConfig": [{"name": "NodeName", "args": {"x": 1}}]}),
        ["profiles[0].pluginConfig[0].args: plugin 'NodeName' takes no args"],
    ),
    (
        "an enabled plugin whose required args are not given",
        config({"plugins": {"filter": {"enabled": [{"name": "RemoteFilter"}]}}}),
        ["profiles[0].pluginConfig: plugin 'RemoteFilter' needs args (endpoint: required field)"],
    ),
    (
        "two profiles with one name",
        config({"schedulerName": "x"}, {"schedulerName": "x"}),
        ["profiles[1].schedulerName: duplicate scheduler name 'x'"],
    ),
    (
        "an unnamed profile among several",
        config({"schedulerName": "x"}, {}),
        ["profiles[1].schedulerName: required when there are several profiles"],
    ),
    (
        "a profile that is not a mapping",
        config("x"),
        ["profiles[0]: must be a mapping, got str"],
    ),
    ("YAML that is a list", "- a\n- b\n", ["configuration must be a mapping, got list"]),
]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [pytest.param(raw, expected, id=case) for case, raw, expected in BAD_CASES],
)
def test_bad_configuration_is_reported_with_its_path(
    raw: dict[str, Any] | str, expected: list[str]
) -> None:
    assert problems_of(raw) == expected


def test_invalid_yaml_is_a_config_error() -> None:
    (problem,) = problems_of("profiles: [\n")
    assert problem.startswith("invalid YAML: ")


def test_every_problem_is_reported_at_once() -> None:
    raw = config(
        {"schedulerName": "x", "plugins": {"filter": {"enabled": [{"name": "Nope"}]}}},
        {
            "schedulerName": "x",
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Most"}}}
            ],
        },
        foo=1,
        parallelism=0,
    )
    with pytest.raises(ConfigError) as info:
        load(raw)
    expected = [
        "parallelism: must be greater than 0, got 0",
        "foo: unknown field",
        "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'Nope'",
        "profiles[1].pluginConfig[0].args.scoringStrategy.type: 'Most' is not one of "
        "['LeastAllocated', 'MostAllocated', 'RequestedToCapacityRatio']",
        "profiles[1].schedulerName: duplicate scheduler name 'x'",
    ]
    assert info.value.problems == expected
    assert str(info.value) == "\n".join(expected)


def test_a_profile_with_a_bad_key_still_has_its_plugin_config_checked() -> None:
    raw = config({"plugin": {}, "pluginConfig": [{"name": "Nope"}]})
    assert problems_of(raw) == [
        "profiles[0].plugin: unknown field, did you mean 'plugins'?",
        "profiles[0].pluginConfig[0].name: unknown plugin 'Nope'",
    ]


def test_a_bad_setting_does_not_hide_an_unrelated_cross_field_rule() -> None:
    raw = config(foo=1, podInitialBackoffSeconds=5, podMaxBackoffSeconds=2)
    assert problems_of(raw) == [
        "foo: unknown field",
        "podMaxBackoffSeconds: must be >= podInitialBackoffSeconds (5), got 2",
    ]


def test_a_default_set_naming_plugins_outside_the_catalog_is_a_wiring_error() -> None:
    small = {"PrioritySort": CATALOG["PrioritySort"]}
    with pytest.raises(ValueError, match=r"default plugins missing from the catalog: \['Nope'\]"):
        load_config(config(), small, default_multipoint=[("PrioritySort", 0), ("Nope", 0)])
    resolved = load_config(
        config({"plugins": {"bind": {"enabled": [{"name": "DefaultBinder"}]}}}),
        {name: CATALOG[name] for name in ("PrioritySort", "DefaultBinder")},
        default_multipoint=[("PrioritySort", 0)],
    )
    assert resolved.profiles[0].enabled == ("PrioritySort", "DefaultBinder")


SCORE = frozenset({"score"})


@pytest.mark.parametrize(
    ("descriptor", "message"),
    [
        pytest.param(
            PluginDescriptor("Scorer", None, SCORE, in_default_profile=True, default_weight=-1),
            "plugin 'Scorer' has a negative default weight",
            id="a negative default weight",
        ),
        pytest.param(
            PluginDescriptor("Scorer", None, SCORE, default_weight=2),
            "plugin 'Scorer' has a default weight but is not a default plugin",
            id="a default weight outside the default profile",
        ),
        pytest.param(
            PluginDescriptor(
                "Gate", None, frozenset({"preEnqueue"}), in_default_profile=True, default_weight=1
            ),
            "plugin 'Gate' has a default weight but does not score",
            id="a default weight on a plugin that does not score",
        ),
    ],
)
def test_a_default_weight_that_cannot_apply_is_a_wiring_error(
    descriptor: PluginDescriptor, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        load_config(config(), {**CATALOG, descriptor.name: descriptor})
