"""The Kubernetes 1.37 gang objects in the embedded cluster: v1beta1 Workload and PodGroup
with upstream's validation, and one PodGroup seen at v1alpha2 and v1beta1 through
conversion (one storage), over HTTP and with the real kubectl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from troupe.sim.apiserver import ApiServer

from tests.sim.conftest import Http, kubectl

BETA = "/apis/scheduling.k8s.io/v1beta1/namespaces/default"
ALPHA = "/apis/scheduling.k8s.io/v1alpha2/namespaces/default"


def beta_group(name: str = "train", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": 4}}, **spec}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": body,
    }


def beta_workload(templates: list[dict[str, Any]], name: str = "job") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {"podGroupTemplates": templates},
    }


async def test_a_v1beta1_pod_group_reads_back_at_v1alpha2_through_conversion(http: Http) -> None:
    created = beta_group(
        workloadRef={"workloadName": "job", "templateName": "workers"},
        disruptionMode={"all": {}},
    )
    code, body = await http.post(f"{BETA}/podgroups", created)
    assert code == 201, body
    code, alpha = await http.get(f"{ALPHA}/podgroups/train")
    assert code == 200
    assert alpha["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert alpha["spec"]["podGroupTemplateRef"] == {
        "workload": {"workloadName": "job", "podGroupTemplateName": "workers"}
    }
    assert alpha["spec"]["disruptionMode"] == "PodGroup"
    assert "workloadRef" not in alpha["spec"]
    assert alpha["metadata"]["uid"] == body["metadata"]["uid"]


async def test_a_v1alpha2_pod_group_reads_back_at_v1beta1_with_defaults(http: Http) -> None:
    created = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "old"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}},
            "disruptionMode": "Pod",
        },
    }
    code, _ = await http.post(f"{ALPHA}/podgroups", created)
    assert code == 201
    _, beta = await http.get(f"{BETA}/podgroups/old")
    assert beta["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert beta["spec"]["workloadRef"] == {"workloadName": "w", "templateName": "t"}
    assert beta["spec"]["disruptionMode"] == {"single": {}}
    _, listed = await http.get(f"{BETA}/podgroups")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["old"]


async def test_conditions_are_copied_verbatim_between_versions(http: Http) -> None:
    await http.post(f"{BETA}/podgroups", beta_group())
    condition = {
        "type": "PodGroupInitiallyScheduled",
        "status": "True",
        "reason": "Scheduled",
        "message": "",
        "lastTransitionTime": "2026-08-01T00:00:00Z",
    }
    code, _ = await http.patch(
        f"{BETA}/podgroups/train/status",
        {"status": {"conditions": [condition]}},
        "application/merge-patch+json",
    )
    assert code == 200
    _, alpha = await http.get(f"{ALPHA}/podgroups/train")
    assert alpha["status"]["conditions"] == [condition]


async def test_one_object_is_one_watch_event_at_each_version(http: Http) -> None:
    await http.post(f"{BETA}/podgroups", beta_group())
    beta_events = await http.watch(f"{BETA}/podgroups", timeoutSeconds="1")
    alpha_events = await http.watch(f"{ALPHA}/podgroups", timeoutSeconds="1")
    assert [(e["type"], e["object"]["apiVersion"]) for e in beta_events] == [
        ("ADDED", "scheduling.k8s.io/v1beta1")
    ]
    assert [(e["type"], e["object"]["apiVersion"]) for e in alpha_events] == [
        ("ADDED", "scheduling.k8s.io/v1alpha2")
    ]


@pytest.mark.parametrize(
    ("spec", "causes"),
    [
        pytest.param(
            {"schedulingPolicy": None},
            [("spec.schedulingPolicy", "FieldValueRequired", "Required value")],
            id="schedulingPolicy is required",
        ),
        pytest.param(
            {"schedulingPolicy": {}},
            [
                (
                    "spec.schedulingPolicy",
                    "FieldValueInvalid",
                    'Invalid value: "": must specify one of: `basic`, `gang`',
                )
            ],
            id="the policy union needs a member",
        ),
        pytest.param(
            {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}},
            [
                (
                    "spec.schedulingPolicy",
                    "FieldValueInvalid",
                    'Invalid value: "{`basic`, `gang`}": exactly one of `basic`, `gang` is '
                    "required, but multiple fields are set",
                )
            ],
            id="the policy union takes one member",
        ),
        pytest.param(
            {"schedulingPolicy": {"gang": {"minCount": 0}}},
            [("spec.schedulingPolicy.gang.minCount", "FieldValueRequired", "Required value")],
            id="minCount 0 is missing",
        ),
        pytest.param(
            {"schedulingPolicy": {"gang": {"minCount": -2}}},
            [
                (
                    "spec.schedulingPolicy.gang.minCount",
                    "FieldValueInvalid",
                    "Invalid value: -2: must be greater than or equal to 1",
                )
            ],
            id="minCount below 1",
        ),
        pytest.param(
            {"schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}},
            [
                (
                    "spec.disruptionMode",
                    "FieldValueInvalid",
                    'Invalid value: "all": must be `single` when the scheduling policy is `basic`',
                )
            ],
            id="disruption all is invalid with basic",
        ),
        pytest.param(
            {"disruptionMode": {"single": {}, "all": {}}},
            [
                (
                    "spec.disruptionMode",
                    "FieldValueInvalid",
                    'Invalid value: "{`single`, `all`}": exactly one of `single`, `all` is '
                    "required, but multiple fields are set",
                )
            ],
            id="the disruption union takes one member",
        ),
        pytest.param(
            {"workloadRef": {"workloadName": "job"}},
            [("spec.workloadRef.templateName", "FieldValueRequired", "Required value")],
            id="workloadRef needs its template name",
        ),
        pytest.param(
            {"schedulingConstraints": {"topology": [{"key": "rack"}, {"key": "zone"}]}},
            [
                (
                    "spec.schedulingConstraints.topology",
                    "FieldValueTooMany",
                    "Too many: 2: must have at most 1 item",
                )
            ],
            id="one topology constraint at most",
        ),
        pytest.param(
            {"resourceClaims": [{"name": f"c{i}", "resourceClaimName": "x"} for i in range(5)]},
            [
                (
                    "spec.resourceClaims",
                    "FieldValueTooMany",
                    "Too many: 5: must have at most 4 items",
                )
            ],
            id="four resource claims at most",
        ),
    ],
)
async def test_invalid_v1beta1_pod_groups_are_refused_as_upstream(
    http: Http, spec: dict[str, Any], causes: list[tuple[str, str, str]]
) -> None:
    body = beta_group(**spec)
    body["spec"] = {k: v for k, v in body["spec"].items() if v is not None}
    code, answer = await http.post(f"{BETA}/podgroups", body)
    assert code == 422, answer
    assert answer["reason"] == "Invalid"
    assert [(c["field"], c["reason"], c["message"]) for c in answer["details"]["causes"]] == causes
    field, _, message = causes[0]
    assert answer["message"] == f'PodGroup.scheduling.k8s.io "train" is invalid: {field}: {message}'


async def test_min_count_is_mutable_and_the_rest_is_not(http: Http) -> None:
    await http.post(f"{BETA}/podgroups", beta_group(priorityClassName="high"))
    code, body = await http.patch(
        f"{BETA}/podgroups/train",
        {"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}},
        "application/merge-patch+json",
    )
    assert code == 200, body
    assert body["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    assert body["metadata"]["generation"] == 2
    code, body = await http.patch(
        f"{BETA}/podgroups/train",
        {"spec": {"priorityClassName": "low", "schedulingPolicy": {"gang": None, "basic": {}}}},
        "application/merge-patch+json",
    )
    assert code == 422
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == [
        ("spec.schedulingPolicy.basic", "Invalid value: {}: field is immutable"),
        ("spec.schedulingPolicy.gang", "Forbidden: field cannot be cleared once set"),
        ("spec.priorityClassName", 'Invalid value: "low": field is immutable'),
    ]


@pytest.mark.parametrize(
    ("templates", "causes"),
    [
        pytest.param(
            [],
            [("spec.podGroupTemplates", "Required value: must have at least one item")],
            id="templates are required",
        ),
        pytest.param(
            [{"name": f"t{i}", "schedulingPolicy": {"basic": {}}} for i in range(9)],
            [("spec.podGroupTemplates", "Too many: 9: must have at most 8 items")],
            id="eight templates at most",
        ),
        pytest.param(
            [
                {"name": "t", "schedulingPolicy": {"basic": {}}},
                {"name": "t", "schedulingPolicy": {"gang": {"minCount": 0}}},
            ],
            [
                ("spec.podGroupTemplates[1].name", 'Duplicate value: "t"'),
                ("spec.podGroupTemplates[1].schedulingPolicy.gang.minCount", "Required value"),
            ],
            id="template names are unique and minCount is required",
        ),
    ],
)
async def test_invalid_v1beta1_workloads_are_refused_as_upstream(
    http: Http, templates: list[dict[str, Any]], causes: list[tuple[str, str]]
) -> None:
    code, answer = await http.post(f"{BETA}/workloads", beta_workload(templates))
    assert code == 422, answer
    assert [(c["field"], c["message"]) for c in answer["details"]["causes"]] == causes


async def test_workload_templates_cannot_be_added_but_min_count_changes(http: Http) -> None:
    template = {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}}
    code, _ = await http.post(f"{BETA}/workloads", beta_workload([template]))
    assert code == 201
    _, alpha = await http.get(f"{ALPHA}/workloads/job")
    assert alpha["spec"]["podGroupTemplates"] == [template]
    _, current = await http.get(f"{BETA}/workloads/job")
    current["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = 3
    code, _ = await http.put(f"{BETA}/workloads/job", current)
    assert code == 200
    _, current = await http.get(f"{BETA}/workloads/job")
    current["spec"]["podGroupTemplates"].append({"name": "x", "schedulingPolicy": {"basic": {}}})
    code, answer = await http.put(f"{BETA}/workloads/job", current)
    assert code == 422
    assert [c["message"] for c in answer["details"]["causes"]] == [
        'Forbidden: may not add item "x"'
    ]


async def test_a_cluster_can_serve_the_1_36_versions_only() -> None:
    server = ApiServer(workload_versions=("v1alpha1", "v1alpha2"))
    async with server, aiohttp.ClientSession() as session:
        http = Http(session, server.url)
        code, _ = await http.get("/apis/scheduling.k8s.io/v1beta1")
        assert code == 404
        created = {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": "Pod"},
        }
        code, body = await http.post(f"{ALPHA}/podgroups", created)
        assert code == 201, body
        assert body["apiVersion"] == "scheduling.k8s.io/v1alpha2"
        assert body["spec"]["disruptionMode"] == "Pod"


async def test_kubectl_reads_the_newest_version_and_patches_min_count(
    http: Http, kubeconfig: Path
) -> None:
    await http.post(f"{BETA}/podgroups", beta_group())
    code, out, err = await kubectl(kubeconfig, "get", "podgroups", "train", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["apiVersion"] == "scheduling.k8s.io/v1beta1"
    code, out, err = await kubectl(
        kubeconfig,
        "patch",
        "podgroups.v1alpha2.scheduling.k8s.io",
        "train",
        "--type=merge",
        "-p",
        '{"spec":{"schedulingPolicy":{"gang":{"minCount":3}}}}',
    )
    assert code == 0, err
    _, beta = await http.get(f"{BETA}/podgroups/train")
    assert beta["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
    code, out, err = await kubectl(
        kubeconfig,
        "patch",
        "podgroups",
        "train",
        "--type=merge",
        "-p",
        '{"spec":{"schedulingPolicy":{"gang":{"minCount":0}}}}',
    )
    assert code != 0
    assert "spec.schedulingPolicy.gang.minCount: Required value" in err
