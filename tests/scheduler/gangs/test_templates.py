"""v1alpha2 PodGroup ``spec.podGroupTemplateRef``: the policy of a PodGroup without
its own comes from the referenced Workload's template (KEP-5832: an inline policy
wins), a missing Workload or template is a problem naming the field, and a change of
the Workload re-evaluates the PodGroups that use it."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.gangapi import PodGroup, WorkloadTemplates
from troupe.api.gangapi_policy import pod_group_policy
from troupe.api.gangs import GangApi, GangPolicy, GroupProblem, GroupRef
from troupe.scheduler.gangs import GangDirectory

from tests.scheduler.gang_helpers import member
from tests.scheduler.gangs.test_attempt_reports import nodes
from tests.scheduler.harness import Harness

NS = "default"
CREATED = "2026-01-01T00:00:00Z"
EPOCH = 1767225600.0


def templates(name: str = "w", **min_counts: int) -> WorkloadTemplates:
    return WorkloadTemplates.model_validate(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "podGroupTemplates": [
                    {"name": t, "schedulingPolicy": {"gang": {"minCount": n}}}
                    for t, n in min_counts.items()
                ]
            },
        }
    )


def pod_group(ref: dict[str, str] | None, policy: dict[str, Any] | None = None) -> PodGroup:
    spec: dict[str, Any] = {}
    if ref is not None:
        spec["podGroupTemplateRef"] = ref
    if policy is not None:
        spec["schedulingPolicy"] = policy
    return PodGroup.model_validate(
        {"metadata": {"name": "pg", "namespace": NS, "creationTimestamp": CREATED}, "spec": spec}
    )


REF = GroupRef(GangApi.POD_GROUP, NS, "pg")
TREF = {"workloadName": "w", "podGroupTemplateName": "workers"}

CASES = [
    pytest.param(
        pod_group(TREF),
        {"w": templates(workers=3)},
        GangPolicy(gang=True, min_count=3, created=EPOCH),
        id="no policy of its own: the template's",
    ),
    pytest.param(
        pod_group(TREF, {"gang": {"minCount": 2}}),
        {"w": templates(workers=3)},
        GangPolicy(gang=True, min_count=2, created=EPOCH),
        id="its own policy wins over the template (KEP-5832 copy/inline)",
    ),
    pytest.param(
        pod_group(TREF),
        {},
        GroupProblem(
            REF,
            "spec.podGroupTemplateRef.workloadName",
            "Workload scheduling.k8s.io/v1alpha2 default/w does not exist",
        ),
        id="the Workload does not exist",
    ),
    pytest.param(
        pod_group(TREF),
        {"w": templates(ps=1, chief=1)},
        GroupProblem(
            REF,
            "spec.podGroupTemplateRef.podGroupTemplateName",
            'pod group template "workers" doesn\'t exist in Workload default/w '
            '(it has "ps", "chief")',
        ),
        id="the template does not exist",
    ),
    pytest.param(
        pod_group({"podGroupTemplateName": "workers"}),
        {},
        GroupProblem(
            REF,
            "spec.podGroupTemplateRef.workloadName",
            "must be set when spec.schedulingPolicy is not",
        ),
        id="no Workload named",
    ),
    pytest.param(
        pod_group(TREF),
        {"w": templates(workers=0)},
        GroupProblem(
            REF,
            "Workload default/w spec.podGroupTemplates[0].schedulingPolicy.gang.minCount",
            "must be at least 1, got 0",
        ),
        id="a bad template is reported with its path",
    ),
]


@pytest.mark.parametrize(("pg", "workloads", "expected"), CASES)
def test_pod_group_template_ref(
    pg: PodGroup, workloads: dict[str, WorkloadTemplates], expected: GangPolicy | GroupProblem
) -> None:
    assert pod_group_policy(pg, None, lambda ns, name: workloads.get(name)) == expected


def test_the_directory_re_evaluates_pod_groups_when_their_workload_changes() -> None:
    d = GangDirectory()
    heard: list[str] = []
    d.on_change(lambda r: heard.append(r.key))
    d.upsert(GangApi.POD_GROUP, pod_group(TREF))
    assert isinstance(d.problem(REF), GroupProblem)
    heard.clear()
    d.upsert(GangApi.POD_GROUP, templates(workers=2))
    assert heard == [REF.key]
    policy = d.policy(REF)
    assert d.problem(REF) is None and policy is not None and policy.min_count == 2
    d.upsert(GangApi.POD_GROUP, templates(workers=2))  # unchanged: nothing to tell
    assert heard == [REF.key]
    d.remove_templates(NS, "w")
    assert heard == [REF.key, REF.key]
    assert isinstance(d.problem(REF), GroupProblem)
    # A Workload and a PodGroup of the same name are different objects.
    d.upsert(GangApi.POD_GROUP, templates("pg", workers=1))
    d.remove_templates(NS, "pg")
    assert d.get(GangApi.POD_GROUP, NS, "pg") is not None


async def test_a_gang_whose_pod_group_names_a_template_waits_for_it_and_then_runs() -> None:
    h = Harness().nodes(nodes(3))
    h.handlers.on_group_add(GangApi.POD_GROUP, pod_group(TREF))
    h.pods(member("pg", i, api="podgroup") for i in range(2))
    await h.settle()
    assert h.client.bindings == []
    h.scheduler.housekeeping()
    await h.settle()
    message = h.client.conditions["default/pg-0"].message
    assert "spec.podGroupTemplateRef.workloadName" in message
    h.handlers.on_group_add(GangApi.POD_GROUP, templates(workers=2))
    await h.settle()
    assert sorted(k for k, _ in h.client.bindings) == ["default/pg-0", "default/pg-1"]
    h.handlers.on_group_delete(GangApi.POD_GROUP, templates(workers=2))
    assert h.parts.groups.get(GangApi.POD_GROUP, NS, "pg") is not None
    await h.close()
