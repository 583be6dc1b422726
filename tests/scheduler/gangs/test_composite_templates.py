"""A CompositePodGroup tree against its v1alpha3 Workload's compositePodGroupTemplates
(KEP-6012): the templates the groups name must follow the tree of templates, else the
layout is ``Invalid``; a Workload missing, or read at v1beta1 (no composite templates),
is not compared."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.gangapi import (
    CompositePodGroup,
    V1alpha3Workload,
    V1beta1PodGroup,
    V1beta1Workload,
)
from troupe.api.gangapi_kinds import TemplatesObject
from troupe.api.gangs import GangApi, GangPolicy, GroupProblem, GroupRef
from troupe.scheduler.gangs import GangDirectory
from troupe.scheduler.gangs.composites import chain_of

NS = "default"


def cpg(name: str, template: str, parent: str | None = None) -> CompositePodGroup:
    spec: dict[str, Any] = {
        "workloadRef": {"workloadName": "job", "templateName": template},
        "schedulingPolicy": {"gang": {"minGroupCount": 1}},
    }
    if parent is not None:
        spec["parentCompositePodGroupName"] = parent
    return CompositePodGroup.model_validate(
        {"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"}, "spec": spec}
    )


def leaf(name: str, parent: str, template: str | None = None) -> V1beta1PodGroup:
    spec: dict[str, Any] = {
        "schedulingPolicy": {"gang": {"minCount": 1}},
        "parentCompositePodGroupName": parent,
    }
    if template is not None:
        spec["workloadRef"] = {"workloadName": "job", "templateName": template}
    return V1beta1PodGroup.model_validate(
        {"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"}, "spec": spec}
    )


def gang(name: str, **children: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"gang": {"minGroupCount": 1}}, **children}


def pod_templates(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "schedulingPolicy": {"gang": {"minCount": 1}}} for n in names]


# root -> replica -> (workers, driver), the shape of KEP-6012's "API overview" diagram.
TREE = [
    gang(
        "root",
        compositePodGroupTemplates=[
            gang("replica", podGroupTemplates=pod_templates("workers", "driver"))
        ],
    )
]


def v1alpha3(templates: list[dict[str, Any]]) -> V1alpha3Workload:
    return V1alpha3Workload.model_validate(
        {
            "metadata": {"name": "job", "namespace": NS},
            "spec": {"compositePodGroupTemplates": templates},
        }
    )


def lookup(workload: TemplatesObject | None) -> Any:
    def find(namespace: str, name: str) -> TemplatesObject | None:
        return workload if (namespace, name) == (NS, "job") else None

    return find


def composites(*objs: CompositePodGroup) -> dict[str, CompositePodGroup]:
    return {f"{NS}/{o.metadata.name}": o for o in objs}


def test_a_tree_that_follows_its_templates_is_valid() -> None:
    groups = composites(cpg("job", "root"), cpg("replica-0", "replica", "job"))
    chain = chain_of(leaf("workers-0", "replica-0", "workers"), groups, lookup(v1alpha3(TREE)))
    assert not isinstance(chain, GroupProblem)
    assert [c.metadata.name for c in chain] == ["replica-0", "job"]


@pytest.mark.parametrize(
    ("groups", "the_leaf", "field", "message"),
    [
        pytest.param(
            (cpg("job", "nope"), cpg("replica-0", "replica", "job")),
            leaf("workers-0", "replica-0", "workers"),
            "spec.parentCompositePodGroupName",
            "CompositePodGroup default/job spec.workloadRef.templateName: composite pod group "
            'template "nope" doesn\'t exist in Workload default/job (it has "root", "replica")',
            id="a root naming no template of the Workload",
        ),
        pytest.param(
            (cpg("job", "replica"),),
            leaf("workers-0", "job", "workers"),
            "spec.parentCompositePodGroupName",
            'composite pod group template "replica" is not a top-level template of Workload '
            'default/job, as a root CompositePodGroup\'s must be (they are "root")',
            id="a root naming a nested template",
        ),
        pytest.param(
            (cpg("job", "root"), cpg("replica-0", "root", "job")),
            leaf("workers-0", "replica-0", "workers"),
            "spec.parentCompositePodGroupName",
            "CompositePodGroup default/replica-0 spec.workloadRef.templateName: composite pod "
            'group template "root" is not a child of template "root" of its parent '
            'default/job in Workload default/job (its composite templates are "replica")',
            id="a child composite naming a template that is not its parent's child",
        ),
        pytest.param(
            (cpg("job", "root"), cpg("replica-0", "replica", "job")),
            leaf("workers-0", "replica-0", "chief"),
            "spec.workloadRef.templateName",
            'pod group template "chief" is not a child of template "replica" of its parent '
            "default/replica-0 in Workload default/job (its pod group templates are "
            '"workers", "driver")',
            id="a leaf naming a template its parent's template does not have",
        ),
    ],
)
def test_a_tree_that_does_not_follow_its_templates_is_invalid(
    groups: tuple[CompositePodGroup, ...], the_leaf: V1beta1PodGroup, field: str, message: str
) -> None:
    chain = chain_of(the_leaf, composites(*groups), lookup(v1alpha3(TREE)))
    assert isinstance(chain, GroupProblem)
    assert chain.outcome == "Invalid" and not chain.waiting
    assert chain.field == field
    assert message in chain.message


@pytest.mark.parametrize(
    "workload",
    [
        pytest.param(None, id="the Workload does not exist (yet)"),
        pytest.param(
            V1beta1Workload.model_validate({"metadata": {"name": "job", "namespace": NS}}),
            id="the Workload read at v1beta1, which has no composite templates",
        ),
    ],
)
def test_without_a_v1alpha3_workload_only_the_names_are_compared(
    workload: TemplatesObject | None,
) -> None:
    chain = chain_of(
        leaf("workers-0", "job", "chief"), composites(cpg("job", "nope")), lookup(workload)
    )
    assert not isinstance(chain, GroupProblem)


def test_a_leaf_naming_no_template_is_not_compared() -> None:
    groups = composites(cpg("job", "root"), cpg("replica-0", "replica", "job"))
    chain = chain_of(leaf("workers-0", "replica-0"), groups, lookup(v1alpha3(TREE)))
    assert not isinstance(chain, GroupProblem)


def test_the_directory_holds_a_leaf_until_its_workload_has_the_template() -> None:
    directory = GangDirectory()
    notified: list[GroupRef] = []
    directory.on_change(notified.append)
    directory.upsert_composite(cpg("job", "job"))
    directory.upsert(GangApi.POD_GROUP, leaf("driver", "job"))
    ref = GroupRef(GangApi.POD_GROUP, NS, "driver")
    composite_ref = GroupRef(GangApi.POD_GROUP, NS, "job", composite=True)
    # No Workload yet: names only, as without v1alpha3.
    assert directory.problem(ref) is None
    assert directory.entity_ref(ref) == composite_ref

    directory.upsert_templates(v1alpha3([gang("other", podGroupTemplates=pod_templates("x"))]))
    problem = directory.problem(ref)
    assert problem is not None and problem.outcome == "Invalid"
    assert 'composite pod group template "job" doesn\'t exist in Workload default/job' in str(
        problem
    )
    # Held as itself, never in the composite's entity; the composite hears of it.
    assert directory.entity_ref(ref) == ref
    assert directory.problem(composite_ref) == problem
    assert composite_ref in notified

    notified.clear()
    directory.upsert_templates(v1alpha3([gang("job", podGroupTemplates=pod_templates("x"))]))
    assert directory.problem(ref) is None
    assert directory.entity_ref(ref) == composite_ref
    assert isinstance(directory.policy(composite_ref), GangPolicy)
    assert ref in notified


def test_a_pod_group_without_a_policy_takes_it_from_a_template_under_a_composite() -> None:
    directory = GangDirectory()
    workers = V1beta1PodGroup.model_validate(
        {
            "metadata": {"name": "workers-0", "namespace": NS, "uid": "uid-w"},
            "spec": {"workloadRef": {"workloadName": "job", "templateName": "workers"}},
        }
    )
    directory.upsert(GangApi.POD_GROUP, workers)
    nested = [
        gang(
            "root",
            compositePodGroupTemplates=[
                gang(
                    "replica",
                    podGroupTemplates=[
                        {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}}
                    ],
                )
            ],
        )
    ]
    directory.upsert_templates(v1alpha3(nested))
    ref = GroupRef(GangApi.POD_GROUP, NS, "workers-0")
    assert directory.problem(ref) is None
    policy = directory.policy(ref)
    assert policy is not None and policy.gang and policy.min_count == 3
