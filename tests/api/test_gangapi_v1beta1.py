"""The Kubernetes 1.37 v1beta1 PodGroup: what troupe reads from it (``policy_of``)."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.gangapi import V1beta1PodGroup, V1beta1Workload
from troupe.api.gangapi_policy import RESOURCE_CLAIMS_UNSUPPORTED, policy_of, ref_of_object
from troupe.api.gangs import GangPolicy, GroupProblem

CREATED = "2026-08-01T00:00:00Z"


def group(**spec: Any) -> V1beta1PodGroup:
    return V1beta1PodGroup.model_validate(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "metadata": {"name": "train", "namespace": "ml", "creationTimestamp": CREATED},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}, **spec},
        }
    )


WORKLOAD = V1beta1Workload.model_validate(
    {
        "metadata": {"name": "job", "namespace": "ml"},
        "spec": {
            "podGroupTemplates": [
                {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 6}}},
            ]
        },
    }
)


def policy(pg: V1beta1PodGroup) -> GangPolicy | GroupProblem:
    priorities = {"high": 1000}
    workloads = {"job": WORKLOAD}
    return policy_of(pg, ref_of_object(pg), priorities.get, lambda _ns, name: workloads.get(name))


def test_a_gang_reads_its_quorum_disruption_preemption_and_topology() -> None:
    found = policy(
        group(
            disruptionMode={"all": {}},
            preemptionPolicy="Never",
            priorityClassName="high",
            schedulingConstraints={"topology": [{"key": "topology.kubernetes.io/rack"}]},
            workloadRef={"workloadName": "job", "templateName": "workers"},
        )
    )
    assert isinstance(found, GangPolicy)
    assert (found.gang, found.min_count, found.priority) == (True, 4, 1000)
    assert found.disrupt_all and found.preemption_policy == "Never"
    assert found.topology.required == "topology.kubernetes.io/rack"


def test_single_disruption_is_the_default() -> None:
    found = policy(group())
    assert isinstance(found, GangPolicy) and not found.disrupt_all


def test_a_group_without_a_policy_takes_its_templates() -> None:
    pg = group(workloadRef={"workloadName": "job", "templateName": "workers"})
    pg.spec.scheduling_policy.gang = None
    found = policy(pg)
    assert isinstance(found, GangPolicy) and found.min_count == 6


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        pytest.param(
            {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "a100"}]},
            "spec.resourceClaims",
            f'{RESOURCE_CLAIMS_UNSUPPORTED} (the group names "gpus")',
            id="group ResourceClaims are not supported yet",
        ),
        pytest.param(
            {"schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}},
            "spec.disruptionMode",
            "all is invalid with the basic scheduling policy",
            id="all is invalid with basic",
        ),
        pytest.param(
            {"schedulingPolicy": {"gang": {"minCount": 0}}},
            "spec.schedulingPolicy.gang.minCount",
            "must be at least 1, got 0",
            id="minCount below 1",
        ),
        pytest.param(
            {"schedulingPolicy": {}, "workloadRef": {"workloadName": "gone", "templateName": "t"}},
            "spec.workloadRef.workloadName",
            "Workload scheduling.k8s.io/v1beta1 ml/gone does not exist",
            id="a missing template Workload",
        ),
    ],
)
def test_problems_name_the_v1beta1_field(spec: dict[str, Any], field: str, message: str) -> None:
    found = policy(group(**spec))
    assert isinstance(found, GroupProblem)
    assert (found.field, found.message, found.outcome) == (field, message, "Unschedulable")
    assert str(found).startswith("scheduling.k8s.io/v1beta1 ml/train: ")


def test_the_parent_composite_group_is_read_for_later() -> None:
    pg = group(parentCompositePodGroupName="job-root")
    assert pg.spec.parent_composite_pod_group_name == "job-root"
