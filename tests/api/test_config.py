"""Tests of troupe.api.config: profile resolution (upstream multiPoint semantics) and errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from troupe.api.config import (
    DEFAULT_MULTIPOINT,
    EXTENSION_POINTS,
    ConfigError,
    PluginDescriptor,
    ResolvedConfig,
    load_config,
    load_config_file,
)
from troupe.api.config_model import parse_go_duration

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


CATALOG = {
    d.name: d
    for d in (
        _desc("SchedulingGates", {"preEnqueue"}),
        _desc("PrioritySort", {"queueSort"}),
        _desc("NodeUnschedulable", {"filter"}),
        _desc("NodeName", {"filter"}),
        _desc("TaintToleration", {"filter", "preScore", "score"}),
        _desc("NodeAffinity", FILTER_SCORE),
        _desc("NodePorts", {"preFilter", "filter"}),
        _desc("NodeResourcesFit", FILTER_SCORE, FitArgs),
        _desc("PodTopologySpread", FILTER_SCORE, SpreadArgs),
        _desc("InterPodAffinity", FILTER_SCORE),
        _desc("NodeResourcesBalancedAllocation", {"preScore", "score"}),
        _desc("DefaultBinder", {"bind"}),
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


# --- resolution ----------------------------------------------------------------------

Check = Callable[[ResolvedConfig], object]

RESOLUTION_CASES: list[tuple[str, dict[str, Any], Check, object]] = [
    (
        "no profile gives upstream's default filters in upstream order",
        config(),
        lambda c: names(c, "filter"),
        DEFAULT_FILTER,
    ),
    (
        "no profile gives upstream's default scorers with their weights",
        config(),
        weighted,
        DEFAULT_SCORE,
    ),
    (
        "the default profile queues with PrioritySort and binds with DefaultBinder",
        config(),
        lambda c: (names(c, "preEnqueue"), names(c, "queueSort"), names(c, "bind")),
        (["SchedulingGates"], ["PrioritySort"], ["DefaultBinder"]),
    ),
    (
        "non-score points carry weight 0",
        config(),
        lambda c: {ref.weight for ref in c.profiles[0].points["filter"]},
        {0},
    ),
    (
        "re-weighting a default in multiPoint keeps its position",
        config(
            {"plugins": {"multiPoint": {"enabled": [{"name": "TaintToleration", "weight": 9}]}}}
        ),
        weighted,
        [("TaintToleration", 9), *DEFAULT_SCORE[1:]],
    ),
    (
        "re-enabling a default at the score point moves it first with the new weight",
        config({"plugins": {"score": {"enabled": [{"name": "NodeAffinity", "weight": 5}]}}}),
        weighted,
        [("NodeAffinity", 5), DEFAULT_SCORE[0], *DEFAULT_SCORE[2:]],
    ),
    (
        "re-enabling at the score point without a weight uses 1, not the multiPoint weight",
        config({"plugins": {"score": {"enabled": [{"name": "TaintToleration"}]}}}),
        lambda c: weighted(c)[0],
        ("TaintToleration", 1),
    ),
    (
        "disabling '*' at score keeps only the scorers enabled there, in their order",
        config(
            {
                "plugins": {
                    "score": {
                        "disabled": [{"name": "*"}],
                        "enabled": [
                            {"name": "ImageLocality", "weight": 4},
                            {"name": "NodeResourcesFit"},
                        ],
                    }
                }
            }
        ),
        weighted,
        [("ImageLocality", 4), ("NodeResourcesFit", 1)],
    ),
    (
        "disabling '*' at score leaves the other points alone",
        config({"plugins": {"score": {"disabled": [{"name": "*"}]}}}),
        lambda c: (names(c, "filter"), weighted(c)),
        (DEFAULT_FILTER, []),
    ),
    (
        "disabling a plugin at one point keeps it at the others",
        config({"plugins": {"filter": {"disabled": [{"name": "TaintToleration"}]}}}),
        lambda c: ("TaintToleration" in names(c, "filter"), "TaintToleration" in names(c, "score")),
        (False, True),
    ),
    (
        "disabling '*' in multiPoint keeps only the multiPoint plugins listed",
        config(
            {
                "plugins": {
                    "multiPoint": {
                        "disabled": [{"name": "*"}],
                        "enabled": [
                            {"name": "PrioritySort"},
                            {"name": "NodeResourcesFit", "weight": 2},
                            {"name": "DefaultBinder"},
                        ],
                    }
                }
            }
        ),
        lambda c: (names(c, "preEnqueue"), names(c, "filter"), weighted(c), names(c, "bind")),
        ([], ["NodeResourcesFit"], [("NodeResourcesFit", 2)], ["DefaultBinder"]),
    ),
    (
        "an extra multiPoint plugin joins every point it implements, after the defaults",
        config({"plugins": {"multiPoint": {"enabled": [{"name": "GangPermit"}]}}}),
        lambda c: {p: names(c, p) for p in ("preEnqueue", "permit", "permitDisruption")},
        {
            "preEnqueue": ["SchedulingGates", "GangPermit"],
            "permit": ["GangPermit"],
            "permitDisruption": ["GangPermit"],
        },
    ),
    (
        "a default both disabled and re-enabled in multiPoint moves after the defaults",
        config(
            {
                "plugins": {
                    "multiPoint": {
                        "disabled": [{"name": "TaintToleration"}],
                        "enabled": [{"name": "TaintToleration", "weight": 4}],
                    }
                }
            }
        ),
        weighted,
        [*DEFAULT_SCORE[1:], ("TaintToleration", 4)],
    ),
    (
        "a plugin both disabled and enabled at a point stays, after the multiPoint ones",
        config(
            {
                "plugins": {
                    "filter": {
                        "enabled": [{"name": "NodeName"}],
                        "disabled": [{"name": "NodeName"}],
                    }
                }
            }
        ),
        lambda c: names(c, "filter"),
        [n for n in DEFAULT_FILTER if n != "NodeName"] + ["NodeName"],
    ),
    (
        "a second bind plugin is tried after DefaultBinder",
        config({"plugins": {"bind": {"enabled": [{"name": "CustomBinder"}]}}}),
        lambda c: names(c, "bind"),
        ["DefaultBinder", "CustomBinder"],
    ),
    (
        "replacing the binder takes '*' at bind",
        config(
            {
                "plugins": {
                    "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "CustomBinder"}]}
                }
            }
        ),
        lambda c: names(c, "bind"),
        ["CustomBinder"],
    ),
    (
        "unknown names under disabled are ignored, as upstream",
        config({"plugins": {"filter": {"disabled": [{"name": "VolumeBinding"}]}}}),
        lambda c: names(c, "filter"),
        DEFAULT_FILTER,
    ),
    (
        "the only profile is called troupe-scheduler and inherits the global percentage",
        config(percentageOfNodesToScore=40),
        lambda c: (c.profiles[0].scheduler_name, c.profiles[0].percentage_of_nodes_to_score),
        ("troupe-scheduler", 40),
    ),
    (
        "an empty profile list means one default profile, as upstream",
        config(profiles=[]),
        lambda c: [p.scheduler_name for p in c.profiles],
        ["troupe-scheduler"],
    ),
    (
        "several profiles keep their names, order and own percentage",
        config(
            {"schedulerName": "troupe-scheduler"},
            {"schedulerName": "gpu", "percentageOfNodesToScore": 100},
            percentageOfNodesToScore=10,
        ),
        lambda c: [(p.scheduler_name, p.percentage_of_nodes_to_score) for p in c.profiles],
        [("troupe-scheduler", 10), ("gpu", 100)],
    ),
    (
        "a pod's scheduler name finds its profile, other names find none",
        config({"schedulerName": "a"}, {"schedulerName": "b"}),
        lambda c: (getattr(c.profile("b"), "scheduler_name", None), c.profile("default-scheduler")),
        ("b", None),
    ),
    (
        "profiles resolve independently",
        config(
            {"schedulerName": "a"},
            {"schedulerName": "b", "plugins": {"score": {"disabled": [{"name": "*"}]}}},
        ),
        lambda c: (len(c.profiles[0].points["score"]), len(c.profiles[1].points["score"])),
        (6, 0),
    ),
    (
        "enabled lists every plugin in use exactly once",
        config(),
        lambda c: sorted(c.profiles[0].enabled),
        sorted(name for name, _ in DEFAULT_MULTIPOINT),
    ),
]


@pytest.mark.parametrize(
    ("raw", "check", "expected"),
    [pytest.param(raw, check, exp, id=case) for case, raw, check, exp in RESOLUTION_CASES],
)
def test_profile_resolution(raw: dict[str, Any], check: Check, expected: object) -> None:
    assert check(load(raw)) == expected


# --- plugin args ---------------------------------------------------------------------


def test_enabled_plugins_without_plugin_config_get_default_args() -> None:
    args = load(config()).profiles[0].args
    assert args == {"NodeResourcesFit": FitArgs(), "PodTopologySpread": SpreadArgs()}


def test_plugin_config_args_are_validated_into_the_plugins_model() -> None:
    raw = config(
        {
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
            ]
        }
    )
    args = load(raw).profiles[0].args["NodeResourcesFit"]
    assert args == FitArgs(scoring_strategy=ScoringStrategy(type="MostAllocated"))


def test_upstream_type_tags_in_args_are_accepted_and_stripped() -> None:
    raw = config(
        {
            "pluginConfig": [
                {
                    "name": "PodTopologySpread",
                    "args": {
                        "apiVersion": "kubescheduler.config.k8s.io/v1",
                        "kind": "PodTopologySpreadArgs",
                        "defaultingType": "List",
                    },
                }
            ]
        }
    )
    assert load(raw).profiles[0].args["PodTopologySpread"] == SpreadArgs(defaulting_type="List")


def test_args_of_a_plugin_that_is_not_enabled_are_checked_but_not_kept() -> None:
    ok = config({"pluginConfig": [{"name": "GangPermit", "args": {"permitWaitSeconds": 5}}]})
    assert "GangPermit" not in load(ok).profiles[0].args
    bad = config({"pluginConfig": [{"name": "GangPermit", "args": {"permitWaitSeconds": 0}}]})
    assert problems_of(bad) == [
        "profiles[0].pluginConfig[0].args.permitWaitSeconds: must be greater than 0, got 0"
    ]


# --- global settings -----------------------------------------------------------------


def test_global_defaults_follow_upstream_and_troupe() -> None:
    c = load(config())
    assert (c.parallelism, c.percentage_of_nodes_to_score) == (16, 0)
    assert (c.pod_initial_backoff_seconds, c.pod_max_backoff_seconds) == (1, 10)
    assert c.pod_max_in_unschedulable_pods_duration == 300.0
    assert (c.assumed_pod_ttl_seconds, c.binding_concurrency) == (900, 64)
    assert c.gang_schedule_timeout_seconds == 300
    le = c.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (
        True,
        15.0,
        10.0,
        2.0,
    )
    assert (le.resource_lock, le.resource_name, le.resource_namespace) == (
        "leases",
        "troupe-scheduler",
        "kube-system",
    )
    cc = c.client_connection
    assert (cc.kubeconfig, cc.qps, cc.burst) == ("", 50.0, 100)


def test_yaml_text_is_accepted() -> None:
    text = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaseDuration: 1m30s
  renewDeadline: 45s
  retryPeriod: 500ms
podMaxInUnschedulablePodsDuration: 2m
assumedPodTTLSeconds: 60
profiles:
  - schedulerName: gang
    plugins:
      multiPoint:
        enabled:
          - name: GangPermit
      score:
        enabled:
          - name: NodeResourcesFit
            weight: 3
    pluginConfig:
      - name: GangPermit
        args:
          permitWaitSeconds: 30
"""
    c = load(text)
    le = c.leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (90.0, 45.0, 0.5)
    assert c.pod_max_in_unschedulable_pods_duration == 120.0
    assert c.assumed_pod_ttl_seconds == 60
    profile = c.profiles[0]
    assert profile.scheduler_name == "gang"
    assert profile.names("permit") == ("GangPermit",)
    assert profile.points["score"][0].name == "NodeResourcesFit"
    assert profile.points["score"][0].weight == 3
    assert profile.args["GangPermit"] == GangArgs(permit_wait_seconds=30)


def test_leader_election_checks_are_skipped_when_it_is_off() -> None:
    raw = config(leaderElection={"leaderElect": False, "renewDeadline": "20s"})
    assert load(raw).leader_election.renew_deadline == 20.0


def test_a_config_file_is_read_and_a_missing_one_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    )
    assert load_config_file(path, CATALOG).profiles[0].scheduler_name == "troupe-scheduler"
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read"):
        load_config_file(tmp_path / "missing.yaml", CATALOG)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("15s", 15.0, id="seconds"),
        pytest.param("1m30s", 90.0, id="minutes and seconds"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("1.5h", 5400.0, id="fractional hours"),
        pytest.param("0", 0.0, id="bare zero"),
        pytest.param("-2s", -2.0, id="negative"),
        pytest.param("250us", 0.00025, id="microseconds"),
    ],
)
def test_go_durations_parse_to_seconds(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "s", "1h2", "15 s", "1d"])
def test_malformed_go_durations_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_go_duration(text)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, 48),
    st.integers(0, 59),
    st.integers(0, 59),
    st.integers(0, 999),
)
def test_go_duration_components_add_up(h: int, m: int, s: int, ms: int) -> None:
    text = f"{h}h{m}m{s}s{ms}ms"
    assert parse_go_duration(text) == pytest.approx(h * 3600 + m * 60 + s + ms / 1000)


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
        ["profiles[0].plugin: unknown field"],
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
        ["profiles[0].plugins.filter.enabled[2].name: unknown plugin 'NodeResourcesFitt'"],
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
        ["profiles[0].pluginConfig[0].args.scoringStrategyy: unknown field"],
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
        "profiles[0].plugin: unknown field",
        "profiles[0].pluginConfig[0].name: unknown plugin 'Nope'",
    ]


def test_a_bad_setting_does_not_hide_an_unrelated_cross_field_rule() -> None:
    raw = config(foo=1, podInitialBackoffSeconds=5, podMaxBackoffSeconds=2)
    assert problems_of(raw) == [
        "foo: unknown field",
        "podMaxBackoffSeconds: must be >= podInitialBackoffSeconds (5), got 2",
    ]


def test_a_catalog_without_the_default_plugins_is_a_wiring_error() -> None:
    small = {"PrioritySort": CATALOG["PrioritySort"]}
    with pytest.raises(ValueError, match="default plugins missing from the catalog"):
        load_config(config(), small)
    resolved = load_config(
        config({"plugins": {"bind": {"enabled": [{"name": "DefaultBinder"}]}}}),
        {name: CATALOG[name] for name in ("PrioritySort", "DefaultBinder")},
        default_multipoint=[("PrioritySort", 0)],
    )
    assert resolved.profiles[0].enabled == ("PrioritySort", "DefaultBinder")


# --- invariants of the merge ---------------------------------------------------------

DEFAULT_NAMES = [name for name, _ in DEFAULT_MULTIPOINT]


@st.composite
def point_overrides(draw: st.DrawFn) -> tuple[str, list[str], list[tuple[str, int | None]]]:
    point = draw(st.sampled_from(EXTENSION_POINTS))
    disabled = draw(st.lists(st.sampled_from([*DEFAULT_NAMES, "*"]), unique=True, max_size=4))
    implementers = sorted(n for n, d in CATALOG.items() if point in d.extension_points)
    enabled = draw(st.lists(st.sampled_from(implementers), unique=True)) if implementers else []
    weights = [draw(st.none() | st.integers(1, 10)) for _ in enabled]
    return point, disabled, list(zip(enabled, weights, strict=True))


@settings(max_examples=150, deadline=None)
@given(point_overrides())
def test_a_point_orders_overrides_then_multipoint_then_new_explicit_plugins(
    case: tuple[str, list[str], list[tuple[str, int | None]]],
) -> None:
    point, disabled, enabled = case
    plugin_set: dict[str, Any] = {
        "disabled": [{"name": n} for n in disabled],
        "enabled": [{"name": n} | ({} if w is None else {"weight": w}) for n, w in enabled],
    }
    remote_args = [{"name": "RemoteFilter", "args": {"endpoint": "http://x"}}]
    raw = config({"plugins": {point: plugin_set}, "pluginConfig": remote_args})
    try:
        refs = load(raw).profiles[0].points[point]
    except ConfigError as exc:
        # Only the structural rules may reject a combination.
        assert all("queueSort" in p or "bind" in p for p in exc.problems), exc.problems
        return
    got = [ref.name for ref in refs]
    explicit = [n for n, _ in enabled]
    from_multipoint = [
        n
        for n in DEFAULT_NAMES
        if "*" not in disabled and point in CATALOG[n].extension_points and n not in disabled
    ]
    # Explicit plugins that re-enable a multiPoint one go first, new ones last (upstream).
    assert got == [
        *(n for n in explicit if n in from_multipoint),
        *(n for n in from_multipoint if n not in explicit),
        *(n for n in explicit if n not in from_multipoint),
    ]
    for ref in refs:
        assert point in CATALOG[ref.name].extension_points
        if point != "score":
            assert ref.weight == 0
        elif ref.name in dict(enabled):
            assert ref.weight == (dict(enabled)[ref.name] or 1)
        else:
            assert ref.weight == dict(DEFAULT_MULTIPOINT)[ref.name]
