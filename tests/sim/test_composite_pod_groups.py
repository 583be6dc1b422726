"""The Kubernetes 1.37 v1alpha3 CompositePodGroup in the embedded cluster: served with
discovery, the status subresource and upstream's validation, over HTTP and with the
real kubectl; a v1beta1 PodGroup naming its parent composite is accepted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from troupe.sim.apiserver import ApiServer

from tests.sim.conftest import Http, kubectl

COMPOSITES = "/apis/scheduling.k8s.io/v1alpha3/namespaces/default/compositepodgroups"
BETA = "/apis/scheduling.k8s.io/v1beta1/namespaces/default"


def composite(name: str = "job", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "workloadRef": {"workloadName": "job", "templateName": "root"},
        "schedulingPolicy": {"gang": {"minGroupCount": 2}},
        **spec,
    }
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "CompositePodGroup",
        "metadata": {"name": name},
        "spec": body,
    }


def causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in body["details"]["causes"]]


async def test_discovery_lists_the_composite_with_its_status_subresource(http: Http) -> None:
    code, listed = await http.get("/apis/scheduling.k8s.io/v1alpha3")
    assert code == 200
    names = {r["name"]: r for r in listed["resources"]}
    assert set(names) == {"compositepodgroups", "compositepodgroups/status", "workloads"}
    assert names["compositepodgroups"]["kind"] == "CompositePodGroup"
    assert names["compositepodgroups"]["namespaced"] is True
    assert "watch" in names["compositepodgroups"]["verbs"]


async def test_create_get_list_status_and_delete(http: Http) -> None:
    code, created = await http.post(COMPOSITES, composite(parentCompositePodGroupName="top"))
    assert code == 201, created
    assert created["spec"]["parentCompositePodGroupName"] == "top"
    code, got = await http.get(f"{COMPOSITES}/job")
    assert code == 200
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    _, listed = await http.get(COMPOSITES)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["job"]
    condition = {
        "type": "CompositePodGroupInitiallyScheduled",
        "status": "False",
        "reason": "Invalid",
        "message": "cycle",
        "lastTransitionTime": "2026-08-01T00:00:00Z",
    }
    got["status"] = {"conditions": [condition]}
    code, written = await http.put(f"{COMPOSITES}/job/status", got)
    assert code == 200, written
    assert written["status"]["conditions"] == [condition]
    code, _ = await http.delete(f"{COMPOSITES}/job")
    assert code == 200
    code, _ = await http.get(f"{COMPOSITES}/job")
    assert code == 404


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"workloadRef": None},
            [("spec.workloadRef", "Required value")],
            id="workloadRef is required",
        ),
        pytest.param(
            {"workloadRef": {"workloadName": "job"}},
            [("spec.workloadRef.templateName", "Required value")],
            id="both names of workloadRef are required",
        ),
        pytest.param(
            {"schedulingPolicy": None},
            [("spec.schedulingPolicy", "Required value")],
            id="schedulingPolicy is required",
        ),
        pytest.param(
            {"schedulingPolicy": {"basic": {}, "gang": {"minGroupCount": 1}}},
            [
                (
                    "spec.schedulingPolicy",
                    'Invalid value: "{`basic`, `gang`}": exactly one of `basic`, `gang` is '
                    "required, but multiple fields are set",
                )
            ],
            id="basic and gang together are refused",
        ),
        pytest.param(
            {"schedulingPolicy": {}},
            [("spec.schedulingPolicy", 'Invalid value: "": must specify one of: `basic`, `gang`')],
            id="an empty policy is refused",
        ),
        pytest.param(
            {"schedulingPolicy": {"gang": {"minGroupCount": -1}}},
            [
                (
                    "spec.schedulingPolicy.gang.minGroupCount",
                    "Invalid value: -1: must be greater than or equal to 1",
                )
            ],
            id="minGroupCount below 1 is refused",
        ),
        pytest.param(
            {"schedulingPolicy": {"gang": {}}},
            [("spec.schedulingPolicy.gang.minGroupCount", "Required value")],
            id="minGroupCount is required",
        ),
        pytest.param(
            {"parentCompositePodGroupName": "Not_A_Name"},
            [
                (
                    "spec.parentCompositePodGroupName",
                    'Invalid value: "Not_A_Name": a lowercase RFC 1123 subdomain must consist '
                    "of lower case alphanumeric characters, '-' or '.', and must start and end "
                    "with an alphanumeric character",
                )
            ],
            id="the parent must be a DNS name",
        ),
    ],
)
async def test_upstream_validation_refuses(
    http: Http, spec: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    body = composite()
    for key, value in spec.items():
        if value is None:
            body["spec"].pop(key)
        else:
            body["spec"][key] = value
    code, answer = await http.post(COMPOSITES, body)
    assert code == 422, answer
    assert causes(answer) == expected


async def test_every_spec_field_is_immutable_and_status_stays_writable(http: Http) -> None:
    await http.post(COMPOSITES, composite())
    _, current = await http.get(f"{COMPOSITES}/job")
    current["spec"]["schedulingPolicy"] = {"gang": {"minGroupCount": 3}}
    current["spec"]["parentCompositePodGroupName"] = "top"
    code, answer = await http.put(f"{COMPOSITES}/job", current)
    assert code == 422
    assert [field for field, _ in causes(answer)] == [
        "spec.parentCompositePodGroupName",
        "spec.schedulingPolicy",
    ]
    code, answer = await http.patch(
        f"{COMPOSITES}/job",
        {"spec": {"workloadRef": {"templateName": "other"}}},
        "application/merge-patch+json",
    )
    assert code == 422
    assert [field for field, _ in causes(answer)] == ["spec.workloadRef"]
    code, _ = await http.patch(
        f"{COMPOSITES}/job",
        {"metadata": {"labels": {"team": "ml"}}},
        "application/merge-patch+json",
    )
    assert code == 200


async def test_a_watch_sees_the_composite_created_and_deleted(http: Http) -> None:
    _, listed = await http.get(COMPOSITES)
    version = listed["metadata"]["resourceVersion"]
    await http.post(COMPOSITES, composite())
    await http.delete(f"{COMPOSITES}/job")
    events = await http.watch(COMPOSITES, limit=2, resourceVersion=version)
    assert [(e["type"], e["object"]["kind"]) for e in events] == [
        ("ADDED", "CompositePodGroup"),
        ("DELETED", "CompositePodGroup"),
    ]


async def test_a_v1beta1_pod_group_names_its_parent_composite(http: Http) -> None:
    group = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "workers"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 6}},
            "parentCompositePodGroupName": "job",
        },
    }
    code, body = await http.post(f"{BETA}/podgroups", group)
    assert code == 201, body
    assert body["spec"]["parentCompositePodGroupName"] == "job"


async def test_a_1_36_cluster_serves_no_composite() -> None:
    server = ApiServer(workload_versions=("v1alpha1", "v1alpha2"))
    async with server, aiohttp.ClientSession() as session:
        http = Http(session, server.url)
        code, _ = await http.get("/apis/scheduling.k8s.io/v1alpha3")
        assert code == 404


async def test_kubectl_creates_gets_and_patches_a_composite(http: Http, kubeconfig: Path) -> None:
    code, out, err = await kubectl(kubeconfig, "create", "-f", "-", stdin=json.dumps(composite()))
    assert code == 0, err
    code, out, err = await kubectl(kubeconfig, "get", "compositepodgroups", "job", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["spec"]["schedulingPolicy"] == {"gang": {"minGroupCount": 2}}
    code, out, err = await kubectl(
        kubeconfig,
        "patch",
        "compositepodgroups",
        "job",
        "--type=merge",
        "-p",
        '{"spec":{"schedulingPolicy":{"gang":{"minGroupCount":1}}}}',
    )
    assert code != 0
    assert "spec.schedulingPolicy: Invalid value" in err
