"""troupe.api.config: how profiles resolve (upstream multiPoint semantics) and plugin args."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.config import (
    EXTENSION_POINTS,
    ConfigError,
    PluginDescriptor,
    ResolvedConfig,
    default_plugin_set,
    load_config,
)

from tests.api.config_catalog import (
    CATALOG,
    DEFAULT_FILTER,
    DEFAULT_SCORE,
    FitArgs,
    ScoringStrategy,
    SpreadArgs,
    config,
    load,
    names,
    problems_of,
    weighted,
)

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
        sorted(name for name, _ in default_plugin_set(CATALOG)),
    ),
]


@pytest.mark.parametrize(
    ("raw", "check", "expected"),
    [pytest.param(raw, check, exp, id=case) for case, raw, check, exp in RESOLUTION_CASES],
)
def test_profile_resolution(raw: dict[str, Any], check: Check, expected: object) -> None:
    assert check(load(raw)) == expected


def test_the_default_set_is_the_catalogs_default_plugins_in_catalog_order() -> None:
    # A default scorer placed after NodeResourcesFit scores right after it.
    locality = PluginDescriptor(
        "ImageLocality", None, frozenset({"score"}), in_default_profile=True, default_weight=4
    )
    others = [d for d in CATALOG.values() if d.name != "ImageLocality"]
    at = [d.name for d in others].index("NodeResourcesFit") + 1
    catalog = {d.name: d for d in [*others[:at], locality, *others[at:]]}
    resolved = load_config(config(), catalog)
    assert [(ref.name, ref.weight) for ref in resolved.profiles[0].points["score"]] == [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("ImageLocality", 4),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1),
    ]


def test_a_plugin_not_marked_default_stays_out_of_the_default_profile() -> None:
    assert "ImageLocality" not in load(config()).profiles[0].enabled


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


# --- invariants of the merge ---------------------------------------------------------

DEFAULT_WEIGHTS = dict(default_plugin_set(CATALOG))
DEFAULT_NAMES = list(DEFAULT_WEIGHTS)


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
            assert ref.weight == DEFAULT_WEIGHTS[ref.name]
