"""Which levels a group asks for: schedulingConstraints and troupe's annotations."""

from __future__ import annotations

import pytest
from troupe.api.gangapi import CoschedulingPodGroup, V1beta1PodGroup
from troupe.api.gangapi_policy import coscheduling_policy, v1beta1_pod_group_policy
from troupe.api.gangs import GangPolicy, GroupProblem
from troupe.api.topology import (
    PREFERRED_ANNOTATION,
    REQUIRED_ANNOTATION,
    TopologyLevels,
    levels_from,
    short_name,
)

ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"


def test_constraints_win_over_the_required_annotation_and_preferred_levels_add() -> None:
    levels, field, _ = levels_from(
        {REQUIRED_ANNOTATION: RACK, PREFERRED_ANNOTATION: f" {RACK}, host"}, (ZONE,)
    )
    assert (levels, field) == (TopologyLevels(ZONE, (RACK, "host")), "")
    assert levels.keys == (ZONE, RACK, "host")
    assert levels_from({}) == (TopologyLevels(), "", "")
    assert not TopologyLevels()


@pytest.mark.parametrize(
    ("annotations", "keys", "field", "words"),
    [
        (
            {REQUIRED_ANNOTATION: "a/b/c"},
            (),
            f"metadata.annotations[{REQUIRED_ANNOTATION}]",
            "a/b/c",
        ),
        ({REQUIRED_ANNOTATION: ""}, (), f"metadata.annotations[{REQUIRED_ANNOTATION}]", "''"),
        ({}, ("bad key",), "spec.schedulingConstraints.topology[0].key", "bad key"),
        ({}, (ZONE, RACK), "spec.schedulingConstraints.topology", "at most 1 item, got 2"),
        ({PREFERRED_ANNOTATION: "x,,y"}, (), f"metadata.annotations[{PREFERRED_ANNOTATION}]", ""),
        ({REQUIRED_ANNOTATION: ZONE, PREFERRED_ANNOTATION: ZONE}, (), "", "twice"),
    ],
)
def test_bad_levels_name_the_field(
    annotations: dict[str, str], keys: tuple[str, ...], field: str, words: str
) -> None:
    levels, got_field, message = levels_from(annotations, keys)
    assert levels == TopologyLevels()
    assert got_field.startswith(field or "metadata.annotations[")
    assert words in message


def test_every_api_reads_the_levels() -> None:
    pg = CoschedulingPodGroup.model_validate(
        {
            "metadata": {
                "name": "g",
                "namespace": "ns",
                "annotations": {REQUIRED_ANNOTATION: RACK},
            },
            "spec": {"minMember": 2},
        }
    )
    found = coscheduling_policy(pg)
    assert isinstance(found, GangPolicy) and found.topology == TopologyLevels(RACK)
    bad = CoschedulingPodGroup.model_validate(
        {
            "metadata": {
                "name": "g",
                "namespace": "ns",
                "annotations": {PREFERRED_ANNOTATION: "-x"},
            },
            "spec": {"minMember": 2},
        }
    )
    problem = coscheduling_policy(bad)
    assert isinstance(problem, GroupProblem)
    assert problem.field == f"metadata.annotations[{PREFERRED_ANNOTATION}]"
    beta = V1beta1PodGroup.model_validate(
        {
            "metadata": {
                "name": "g",
                "namespace": "ns",
                "annotations": {PREFERRED_ANNOTATION: RACK},
            },
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "schedulingConstraints": {"topology": [{"key": ZONE}]},
            },
        }
    )
    found = v1beta1_pod_group_policy(beta)
    assert isinstance(found, GangPolicy) and found.topology == TopologyLevels(ZONE, (RACK,))


def test_messages_name_a_level_by_its_name_part() -> None:
    assert short_name(ZONE) == "zone"
    assert short_name("rack") == "rack"
