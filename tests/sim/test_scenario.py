"""Scenario files: valid ones load, bad ones name the offending field."""

from __future__ import annotations

from pathlib import Path

import pytest
from troupe.sim.scenario import (
    DEFAULT_SCENARIO,
    RUN_SECONDS_ANNOTATION,
    ScenarioError,
    load_scenario,
    pod_manifests,
)


def test_the_default_scenario_is_valid() -> None:
    scenario = load_scenario(DEFAULT_SCENARIO)
    assert scenario.nodes[0].count == 12
    assert any(s.add_nodes is not None for s in scenario.steps)


def test_a_yaml_file_loads_with_camel_case_keys(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        "name: t\nnodes: [{count: 2, cpu: '4', namePrefix: w}]\n"
        "steps:\n  - at: 1\n    pods: {name: a, count: 3, runSeconds: 2}\n"
        "  - at: 2\n    removeNodes: {names: [w-0]}\n"
    )
    scenario = load_scenario(f)
    assert scenario.nodes[0].name_prefix == "w"
    assert scenario.steps[0].pods is not None and scenario.steps[0].pods.run_seconds == 2
    assert scenario.steps[1].remove_nodes is not None


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        pytest.param({"nodes": [{"count": -1}]}, "nodes[0].count", id="negative node count"),
        pytest.param({"steps": [{"at": 0}]}, "exactly one of", id="a step with no action"),
        pytest.param({"stepz": []}, "stepz", id="an unknown key"),
        pytest.param(
            {"steps": [{"pods": {"name": "a", "cuont": 1}}]},
            "steps[0].pods.cuont",
            id="a misspelt pod field",
        ),
    ],
)
def test_a_bad_scenario_names_the_field(doc: dict[str, object], message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario(doc, origin="s.yaml")
    assert message in str(err.value) and "s.yaml" in str(err.value)


def test_a_missing_file_is_reported_by_path(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "nope.yaml")


def test_pod_manifests_carry_requests_scheduler_and_run_time() -> None:
    scenario = load_scenario(
        {"steps": [{"pods": {"name": "j", "count": 2, "cpu": "2", "gpus": 1, "runSeconds": 3}}]}
    )
    step = scenario.steps[0].pods
    assert step is not None
    pods = pod_manifests(step, first_index=5)
    assert [p["metadata"]["name"] for p in pods] == ["j-5", "j-6"]
    spec = pods[0]["spec"]
    assert spec["schedulerName"] == "troupe-scheduler"
    assert spec["containers"][0]["resources"]["requests"] == {
        "cpu": "2",
        "memory": "128Mi",
        "nvidia.com/gpu": "1",
    }
    assert pods[0]["metadata"]["annotations"] == {RUN_SECONDS_ANNOTATION: "3"}
