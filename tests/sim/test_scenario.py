"""Scenario files: valid ones load, bad ones name the offending field; pods and gang
steps become the API objects the embedded cluster serves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from troupe.api.gangs import POD_GROUP_LABEL, GangApi, group_ref_of
from troupe.api.objects import Pod
from troupe.api.topology import PREFERRED_ANNOTATION, REQUIRED_ANNOTATION
from troupe.sim.manifests import (
    GANG_KINDS,
    RUN_SECONDS_ANNOTATION,
    composite_manifests,
    gang_manifests,
    pod_manifests,
)
from troupe.sim.nodespec import RACK_LABEL, ZONE_LABEL
from troupe.sim.scenario import DEFAULT_SCENARIO, GangStep, ScenarioError, load_scenario


def test_the_default_scenario_has_plain_pods_and_gangs_of_two_apis_at_least() -> None:
    scenario = load_scenario(DEFAULT_SCENARIO)
    gangs = [s.gang for s in scenario.steps if s.gang is not None]
    assert any(s.pods is not None for s in scenario.steps)
    assert len({g.api for g in gangs}) >= 2
    gpus = sum(n.count * n.gpus for n in scenario.nodes)
    # One gang can never fit, and two that fit only one after the other.
    assert any(g.size * g.gpus > gpus for g in gangs)
    big = [g for g in gangs if gpus / 2 < g.size * g.gpus <= gpus]
    assert len(big) == 2 and big[0].run_seconds is not None


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
        pytest.param(
            {"steps": [{"gang": {"name": "a", "size": 2, "minMembr": 1}}]},
            "steps[0].gang.minMembr: Extra inputs are not permitted",
            id="a misspelt gang field",
        ),
        pytest.param(
            {"steps": [{"gang": {"name": "a"}}]},
            "steps[0].gang.size: Field required",
            id="a gang without a size",
        ),
        pytest.param(
            {"steps": [{"gang": {"name": "a", "size": 0}}]},
            "steps[0].gang.size",
            id="an empty gang",
        ),
        pytest.param(
            {"steps": [{"gang": {"name": "a", "size": 2, "minMember": 0}}]},
            "steps[0].gang.minMember",
            id="a gang with minMember 0",
        ),
        pytest.param(
            {"steps": [{"gang": {"name": "a", "size": 2, "api": "volcano"}}]},
            "steps[0].gang.api: Input should be 'coscheduling', 'workload' or 'podgroup'",
            id="an unknown gang api",
        ),
        pytest.param(
            {"steps": [{"gang": {"name": "a", "size": 2, "api": "podgroup", "minResources": {}}}]},
            "steps[0].gang: minResources: only the scheduler-plugins PodGroup",
            id="minResources on an api that has none",
        ),
        pytest.param(
            {"steps": [{"gang": {"name": "a", "size": 2}, "pods": {"name": "b"}}]},
            "steps[0]: a step needs exactly one of pods, gang, composite, addNodes, removeNodes",
            id="a step with a gang and pods",
        ),
        pytest.param(
            {"steps": [{"gang": {"name": "a", "size": 2}}, {"gang": {"name": "a", "size": 3}}]},
            "steps[1].gang.name: 'a' is already used by steps[0].gang.name",
            id="two gangs of one name",
        ),
        pytest.param(
            {"steps": [{"pods": {"name": "a"}}, {"gang": {"name": "a", "size": 3}}]},
            "steps[1].gang.name: 'a' is already used by steps[0].pods.name",
            id="a gang named like a pods step",
        ),
        pytest.param(
            {"steps": [{"gang": {"name": "a", "size": 3}}, {"pods": {"name": "a"}}]},
            "steps[1].pods.name: 'a' is already used by steps[0].gang.name",
            id="a pods step named like a gang",
        ),
        pytest.param(
            {"steps": [{"gang": {"name": "a", "size": 2, "apiVersion": "v1beta1"}}]},
            "steps[0].gang: apiVersion: only api: podgroup has versions, not api: coscheduling",
            id="a version of an api that has one",
        ),
        pytest.param(
            {"steps": [{"composite": {"name": "c", "groups": []}}]},
            "steps[0].composite.groups: List should have at least 1 item",
            id="a composite without groups",
        ),
        pytest.param(
            {
                "steps": [
                    {
                        "composite": {
                            "name": "c",
                            "groups": [{"name": "a", "size": 1, "api": "workload"}],
                        }
                    }
                ]
            },
            "steps[0].composite: groups[0].api: implied",
            id="a composite child of another api",
        ),
        pytest.param(
            {
                "steps": [
                    {
                        "composite": {
                            "name": "c",
                            "minGroupCount": 0,
                            "groups": [{"name": "a", "size": 1}],
                        }
                    }
                ]
            },
            "steps[0].composite.minGroupCount",
            id="minGroupCount 0",
        ),
        pytest.param(
            {"steps": [{"gang": {"name": "a", "size": 2, "topology": {"required": "a/b/c"}}}]},
            "steps[0].gang.topology: required: Invalid value: 'a/b/c'",
            id="a topology label that is no label key",
        ),
        pytest.param(
            {
                "steps": [
                    {
                        "gang": {
                            "name": "a",
                            "size": 2,
                            "topology": {"required": RACK_LABEL, "preferred": [RACK_LABEL]},
                        }
                    }
                ]
            },
            "steps[0].gang.topology: a label may be named once",
            id="a preferred level that is the required one",
        ),
        pytest.param(
            {"steps": [{"gang": {"name": "a", "size": 2, "topology": {}}}]},
            "steps[0].gang.topology: give required, preferred or both",
            id="an empty topology",
        ),
        pytest.param(
            {"steps": [{"gang": {"name": "a", "size": 2, "topology": {"requird": "x"}}}]},
            "steps[0].gang.topology.requird: Extra inputs are not permitted",
            id="a misspelt topology field",
        ),
        pytest.param(
            {
                "steps": [
                    {"gang": {"name": "a", "size": 2}},
                    {"composite": {"name": "c", "groups": [{"name": "a", "size": 1}]}},
                ]
            },
            "steps[1].composite.groups[0].name: 'a' is already used by steps[0].gang.name",
            id="a composite child named like a gang",
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


def test_two_pods_steps_of_one_name_and_gangs_of_one_name_in_two_namespaces_load() -> None:
    scenario = load_scenario(
        {
            "steps": [
                {"pods": {"name": "a"}},
                {"pods": {"name": "a"}},
                {"gang": {"name": "g", "size": 2}},
                {"gang": {"name": "g", "size": 2, "namespace": "other"}},
            ]
        }
    )
    assert len(scenario.steps) == 4


def test_a_gang_step_in_yaml_takes_camel_case_keys_and_defaults() -> None:
    scenario = load_scenario(
        "steps:\n  - at: 1\n    gang: {name: t, size: 4, runSeconds: 2, "
        "minResources: {cpu: 8, nvidia.com/gpu: '2'}}\n"
    )
    gang = scenario.steps[0].gang
    assert gang is not None
    assert (gang.api, gang.min_member, gang.quorum, gang.run_seconds) == (
        "coscheduling",
        None,
        4,
        2,
    )
    assert gang.min_resources == {"cpu": 8, "nvidia.com/gpu": "2"}


def _member_of(pod: dict[str, Any]) -> tuple[GangApi, str] | None:
    ref = group_ref_of(Pod.model_validate(pod))
    return None if ref is None else (ref.api, ref.name)


@pytest.mark.parametrize(
    ("api", "expected_api", "quorum_path"),
    [
        pytest.param(
            "coscheduling",
            GangApi.COSCHEDULING,
            ("spec", "minMember"),
            id="a coscheduling gang is a scheduler-plugins PodGroup and labelled pods",
        ),
        pytest.param(
            "workload",
            GangApi.WORKLOAD,
            ("spec", "podGroups", 0, "policy", "gang", "minCount"),
            id="a workload gang is a Workload with one gang pod group and workloadRef pods",
        ),
        pytest.param(
            "podgroup",
            GangApi.POD_GROUP,
            ("spec", "schedulingPolicy", "gang", "minCount"),
            id="a podgroup gang is a v1alpha2 PodGroup and schedulingGroup pods",
        ),
    ],
)
def test_gang_manifests_make_the_group_object_and_members_of_each_api(
    api: str, expected_api: GangApi, quorum_path: tuple[str | int, ...]
) -> None:
    step = GangStep.model_validate(
        {"name": "train", "size": 3, "minMember": 2, "api": api, "cpu": "2", "runSeconds": 1}
    )
    made = gang_manifests(step)
    assert made.kind == GANG_KINDS[api]
    assert made.group["apiVersion"] == expected_api.value
    assert made.group["metadata"] == {"name": "train", "namespace": "default"}
    value: Any = made.group
    for part in quorum_path:
        value = value[part]
    assert value == 2
    assert [p["metadata"]["name"] for p in made.pods] == ["train-0", "train-1", "train-2"]
    assert all(_member_of(p) == (expected_api, "train") for p in made.pods)
    assert all(p["metadata"]["labels"]["app"] == "train" for p in made.pods)
    assert made.pods[0]["metadata"]["annotations"] == {RUN_SECONDS_ANNOTATION: "1"}
    assert made.pods[0]["spec"]["schedulerName"] == "troupe-scheduler"


@pytest.mark.parametrize(
    ("fields", "group_spec", "pod_priority"),
    [
        pytest.param(
            {"api": "coscheduling", "minResources": {"cpu": 16}},
            {"minMember": 4, "minResources": {"cpu": "16"}},
            "",
            id="minResources is written as quantity strings",
        ),
        pytest.param(
            {"api": "podgroup", "priorityClassName": "high"},
            {"schedulingPolicy": {"gang": {"minCount": 4}}, "priorityClassName": "high"},
            "high",
            id="a podgroup carries the priority class, as its pods do",
        ),
        pytest.param(
            {"api": "coscheduling", "priorityClassName": "high"},
            {"minMember": 4},
            "high",
            id="a coscheduling PodGroup has no priority: only its pods do",
        ),
    ],
)
def test_gang_manifests_optional_fields(
    fields: dict[str, Any], group_spec: dict[str, Any], pod_priority: str
) -> None:
    made = gang_manifests(GangStep.model_validate({"name": "g", "size": 4, **fields}))
    assert made.group["spec"] == group_spec
    assert made.pods[0]["spec"].get("priorityClassName", "") == pod_priority


def test_coscheduling_members_carry_the_pod_group_label() -> None:
    made = gang_manifests(GangStep(name="g", size=1))
    assert made.pods[0]["metadata"]["labels"] == {"app": "g", POD_GROUP_LABEL: "g"}


def test_composite_manifests_make_the_composite_and_its_v1beta1_pod_groups() -> None:
    scenario = load_scenario(
        {
            "steps": [
                {
                    "composite": {
                        "name": "spark",
                        "minGroupCount": 2,
                        "groups": [
                            {"name": "driver", "size": 1},
                            {"name": "workers", "size": 8, "minMember": 6},
                        ],
                    }
                }
            ]
        }
    )
    step = scenario.steps[0].composite
    assert step is not None
    composite, leaves = composite_manifests(step)
    assert composite["apiVersion"] == "scheduling.k8s.io/v1alpha3"
    assert composite["spec"] == {
        "workloadRef": {"workloadName": "spark", "templateName": "spark"},
        "schedulingPolicy": {"gang": {"minGroupCount": 2}},
    }
    workers = leaves[1]
    assert workers.group["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert workers.group["spec"] == {
        "schedulingPolicy": {"gang": {"minCount": 6}},
        "parentCompositePodGroupName": "spark",
    }
    assert len(workers.pods) == 8
    assert workers.pods[0]["spec"]["schedulingGroup"] == {"podGroupName": "workers"}
    basic = step.model_copy(update={"min_group_count": None})
    assert composite_manifests(basic)[0]["spec"]["schedulingPolicy"] == {"basic": {}}


def test_the_default_scenario_shows_a_v1beta1_gang_and_a_composite() -> None:
    scenario = load_scenario(DEFAULT_SCENARIO)
    assert any(s.gang and s.gang.api_version == "v1beta1" for s in scenario.steps)
    composites = [s.composite for s in scenario.steps if s.composite is not None]
    assert composites and composites[0].min_group_count == len(composites[0].groups)


def test_the_default_scenario_has_racks_and_a_rack_constrained_v1beta1_gang() -> None:
    scenario = load_scenario(DEFAULT_SCENARIO)
    assert all(group.racks >= 2 for group in scenario.nodes)
    (ranged,) = [s.gang for s in scenario.steps if s.gang and s.gang.topology]
    assert (ranged.api, ranged.api_version, ranged.topology_keys) == (
        "podgroup",
        "v1beta1",
        (RACK_LABEL,),
    )
    # More than one pod: spreading would usually use several racks.
    assert ranged.size > 1
    made = gang_manifests(ranged)
    assert made.group["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK_LABEL}]}


@pytest.mark.parametrize(
    ("fields", "constraints", "annotations"),
    [
        pytest.param(
            {"api": "podgroup", "apiVersion": "v1beta1", "topology": {"required": RACK_LABEL}},
            {"topology": [{"key": RACK_LABEL}]},
            {},
            id="a PodGroup's required level is its schedulingConstraints",
        ),
        pytest.param(
            {
                "api": "podgroup",
                "topology": {"required": ZONE_LABEL, "preferred": [RACK_LABEL]},
            },
            {"topology": [{"key": ZONE_LABEL}]},
            {PREFERRED_ANNOTATION: RACK_LABEL},
            id="a v1alpha2 PodGroup too, with the preferred levels annotated",
        ),
        pytest.param(
            {"api": "coscheduling", "topology": {"required": ZONE_LABEL}},
            None,
            {REQUIRED_ANNOTATION: ZONE_LABEL},
            id="a scheduler-plugins PodGroup has only the annotation",
        ),
        pytest.param(
            {"api": "workload", "topology": {"preferred": [ZONE_LABEL, RACK_LABEL]}},
            None,
            {PREFERRED_ANNOTATION: f"{ZONE_LABEL},{RACK_LABEL}"},
            id="a Workload with preferred levels only",
        ),
    ],
)
def test_a_gang_step_topology_becomes_constraints_or_annotations(
    fields: dict[str, Any], constraints: dict[str, Any] | None, annotations: dict[str, str]
) -> None:
    made = gang_manifests(GangStep.model_validate({"name": "g", "size": 2, **fields}))
    assert made.group["spec"].get("schedulingConstraints") == constraints
    assert made.group["metadata"].get("annotations", {}) == annotations
