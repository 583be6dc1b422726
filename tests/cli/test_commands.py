"""``troupe version`` and ``troupe validate-config``."""

from __future__ import annotations

from pathlib import Path

import pytest
from troupe import __version__
from troupe.cli import main

GOOD = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: troupe-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
"""

BAD = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podMaxBackoffSeconds: 0
profiles:
- plugins:
    filter:
      enabled: [{name: NodeResourcesFitt}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: Most}}
"""


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"troupe {__version__}"


def test_the_version_flag_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    # ``troupe --version``: what the image's smoke test runs (scripts/build-image).
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"troupe {__version__}"


def test_a_good_profile_is_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "profile.yaml"
    f.write_text(GOOD)
    assert main(["validate-config", str(f)]) == 0
    assert capsys.readouterr().out.strip() == "ok"


def test_a_bad_profile_lists_every_problem_with_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "profile.yaml"
    f.write_text(BAD)
    assert main(["validate-config", str(f)]) == 1
    err = capsys.readouterr().err
    assert "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'NodeResourcesFitt'" in err
    assert "profiles[0].pluginConfig[0].args.scoringStrategy.type: 'Most' is not one of" in err
    assert "podMaxBackoffSeconds" in err


def test_a_missing_file_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate-config", str(tmp_path / "nope.yaml")]) == 1
    assert "nope.yaml" in capsys.readouterr().err


def test_sim_metrics_port_without_serve_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("name: x\n")
    with pytest.raises(SystemExit) as exited:
        main(["sim", "--metrics-port", "9100", "--scenario", str(scenario)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "usage: troupe sim" in err
    assert "--metrics-port needs --serve" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sim", "--no-scheduler"], "--no-scheduler needs --serve"),
        (
            ["sim", "--serve", "--no-scheduler", "--metrics-port", "9100"],
            "not with --no-scheduler",
        ),
    ],
)
def test_sim_no_scheduler_misuse_is_a_usage_error(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "usage: troupe sim" in err and message in err


COSCHEDULING_TYPOS = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: troupe-scheduler
  plugins:
    queueSort:
      enabled: [{name: CoScheduling}]
      disabled: [{name: "*"}]
    score:
      enabled: [{name: NodeResourcesFit, weight: "5"}]
  pluginConfig:
  - name: Coscheduling
    args: {permitWaitingTimeSeconds: "10"}
"""


def test_a_coscheduling_profile_with_typos_gets_one_line_per_typo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The profile from issue 31: the misspelt queue-sort plugin is reported once, with
    # the name meant; the quoted numbers are errors, as kube-scheduler makes them.
    f = tmp_path / "profile.yaml"
    f.write_text(COSCHEDULING_TYPOS)
    assert main(["validate-config", str(f)]) == 1
    lines = [line.removeprefix(f"{f}: ") for line in capsys.readouterr().err.splitlines()]
    assert lines == [
        "profiles[0].plugins.score.enabled[0].weight: must be a valid integer, got '5'",
        "profiles[0].plugins.queueSort.enabled[0].name: unknown plugin 'CoScheduling', "
        "did you mean 'Coscheduling'?",
        "profiles[0].pluginConfig[0].args.permitWaitingTimeSeconds: must be a valid integer, "
        "got '10'",
    ]
