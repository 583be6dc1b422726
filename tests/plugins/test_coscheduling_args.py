"""CoschedulingArgs: scheduler-plugins' documented profile loads unchanged; bad args
are refused naming the field."""

from __future__ import annotations

import pytest
from troupe.api.config import ConfigError, ResolvedConfig, load_config
from troupe.api.cycle import CycleState
from troupe.api.status import Code, Status
from troupe.plugins.coscheduling import (
    CoschedulingArgs,
)
from troupe.plugins.registry import catalog, default_registry

from tests.plugins.coscheduling_doubles import (
    PG,
    Directory,
    gang,
    member,
    plugin_for,
)

# --- args ----------------------------------------------------------------------------

CATALOG = catalog(default_registry())


def scheduler_plugins_profile(args: dict[str, object]) -> ResolvedConfig:
    return load_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            # scheduler-plugins' documented profile, unchanged.
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                        "queueSort": {
                            "enabled": [{"name": "Coscheduling"}],
                            "disabled": [{"name": "*"}],
                        },
                    },
                    "pluginConfig": [{"name": "Coscheduling", "args": args}],
                }
            ],
        },
        CATALOG,
    )


def coscheduling_args(args: dict[str, object]) -> CoschedulingArgs:
    model = scheduler_plugins_profile(args).profiles[0].args["Coscheduling"]
    assert isinstance(model, CoschedulingArgs)
    return model


def test_scheduler_plugins_documented_profile_loads_unchanged() -> None:
    profile = scheduler_plugins_profile({}).profiles[0]
    assert profile.names("queueSort") == ("Coscheduling",)
    for point in ("preFilter", "postFilter", "reserve", "permit"):
        assert "Coscheduling" in profile.names(point), point


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param({}, (60, 0, 10), id="upstream's defaults"),
        pytest.param(
            {
                "permitWaitingTimeSeconds": 5,
                "podGroupBackoffSeconds": 30,
                "podGroupRejectPercentage": 0,
            },
            (5, 30, 0),
            id="camelCase fields as scheduler-plugins writes them",
        ),
    ],
)
def test_args_load(args: dict[str, object], expected: tuple[int, int, int]) -> None:
    model = coscheduling_args(args)
    assert (
        model.permit_waiting_time_seconds,
        model.pod_group_backoff_seconds,
        model.pod_group_reject_percentage,
    ) == expected


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        pytest.param(
            {"permitWaitingTimeSeconds": -1},
            "permitWaitingTimeSeconds: Invalid value: -1: must be greater than or equal to 0",
            id="a negative permit wait is refused",
        ),
        pytest.param(
            {"podGroupBackoffSeconds": -5},
            "podGroupBackoffSeconds: Invalid value: -5: must be greater than or equal to 0",
            id="a negative backoff is refused",
        ),
        pytest.param(
            {"podGroupRejectPercentage": 101},
            "podGroupRejectPercentage: Invalid value: 101: must be between 0 and 100",
            id="a percentage above 100 is refused",
        ),
        pytest.param(
            {"podGroupRejectPercentage": -1},
            "podGroupRejectPercentage: Invalid value: -1: must be between 0 and 100",
            id="a negative percentage is refused",
        ),
        pytest.param(
            {"deniedPGExpirationTimeSeconds": 3},
            "deniedPGExpirationTimeSeconds: unknown field",
            id="an argument upstream dropped is an unknown field",
        ),
    ],
)
def test_bad_args_are_refused_naming_the_field(args: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        coscheduling_args(args)
    assert info.value.problems == [f"profiles[0].pluginConfig[0].args.{problem}"]


def test_a_plugin_built_without_args_uses_the_defaults() -> None:
    groups = Directory({PG: gang(2)}, placed={PG: 1})
    plugin, _ = plugin_for(groups)
    assert plugin.permit(CycleState(), member("p1"), "n1") == (Status(Code.WAIT), 60.0)
