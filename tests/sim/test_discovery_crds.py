"""Discovery, /version, health, and CustomResourceDefinitions coming and going, checked
against the documents a real API server publishes."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from troupe.sim.apiserver import ApiServer
from troupe.sim.crds import POD_GROUP_CRD

from tests.sim.conftest import Http

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PG_GV = "/apis/scheduling.x-k8s.io/v1alpha1"
PGS = f"{PG_GV}/namespaces/default/podgroups"


def pod_group(name: str, min_member: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member},
    }


async def test_version_and_health(http: Http) -> None:
    _, version = await http.get("/version")
    assert (version["major"], version["minor"], version["gitVersion"]) == (
        "1",
        "37",
        "v1.37.0-troupe-sim",
    )
    assert version["emulationMinor"] == "37"
    for path in ("/healthz", "/readyz", "/livez"):
        assert await http.get(path) == (200, "ok")


async def test_a_cluster_serving_the_1_36_versions_reports_1_36() -> None:
    server = ApiServer(workload_versions=("v1alpha1", "v1alpha2"))
    async with server, aiohttp.ClientSession() as session:
        _, version = await Http(session, server.url).get("/version")
    assert (version["minor"], version["emulationMinor"], version["gitVersion"]) == (
        "36",
        "36",
        "v1.36.0-troupe-sim",
    )


async def test_core_discovery_lists_pod_subresources(http: Http) -> None:
    _, versions = await http.get("/api")
    assert (versions["kind"], versions["versions"]) == ("APIVersions", ["v1"])
    _, resources = await http.get("/api/v1")
    by_name = {r["name"]: r for r in resources["resources"]}
    assert resources["kind"] == "APIResourceList" and resources["groupVersion"] == "v1"
    assert by_name["pods"]["shortNames"] == ["po"] and by_name["pods"]["namespaced"] is True
    assert by_name["pods/binding"] == {
        "name": "pods/binding",
        "singularName": "",
        "namespaced": True,
        "kind": "Binding",
        "verbs": ["create"],
    }
    assert (
        by_name["pods/eviction"]["group"] == "policy"
        and by_name["pods/eviction"]["kind"] == "Eviction"
    )
    assert by_name["pods/status"]["verbs"] == ["get", "patch", "update"]
    assert by_name["nodes"]["namespaced"] is False


async def test_group_discovery_prefers_ga_versions(http: Http) -> None:
    _, groups = await http.get("/apis")
    scheduling = next(g for g in groups["groups"] if g["name"] == "scheduling.k8s.io")
    assert [v["version"] for v in scheduling["versions"]] == [
        "v1",
        "v1beta1",
        "v1alpha3",
        "v1alpha2",
        "v1alpha1",
    ]
    assert scheduling["preferredVersion"] == {
        "groupVersion": "scheduling.k8s.io/v1",
        "version": "v1",
    }
    _, alpha2 = await http.get("/apis/scheduling.k8s.io/v1alpha2")
    assert {r["name"] for r in alpha2["resources"]} == {
        "podgroups",
        "podgroups/status",
        "workloads",
    }


async def test_aggregated_discovery_when_asked(http: Http) -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    async with http.session.get(http.base + "/apis", headers={"Accept": accept}) as response:
        assert response.headers["Content-Type"] == (
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        )
        body = await response.json(content_type=None)
    policy = next(i for i in body["items"] if i["metadata"]["name"] == "policy")
    resource = policy["versions"][0]["resources"][0]
    assert (
        resource["resource"],
        resource["scope"],
        resource["subresources"][0]["subresource"],
    ) == (
        "poddisruptionbudgets",
        "Namespaced",
        "status",
    )


async def test_crd_makes_its_kind_served_and_discoverable(http: Http) -> None:
    code, crd = await http.post(CRDS, POD_GROUP_CRD)
    assert code == 201
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]} == {
        "NamesAccepted": "True",
        "Established": "True",
    }
    _, resources = await http.get(PG_GV)
    by_name = {r["name"]: r for r in resources["resources"]}
    assert by_name["podgroups"]["shortNames"] == ["pg", "pgs"]
    assert by_name["podgroups"]["kind"] == "PodGroup" and "podgroups/status" in by_name
    code, created = await http.post(PGS, pod_group("g"))
    assert (code, created["apiVersion"], created["kind"]) == (
        201,
        "scheduling.x-k8s.io/v1alpha1",
        "PodGroup",
    )
    _, listed = await http.get(PGS)
    assert (listed["kind"], [i["metadata"]["name"] for i in listed["items"]]) == (
        "PodGroupList",
        ["g"],
    )


async def test_crd_status_subresource_and_custom_object_rules(http: Http) -> None:
    await http.post(CRDS, POD_GROUP_CRD)
    _, created = await http.post(PGS, pod_group("g"))
    _, updated = await http.put(
        f"{PGS}/g/status", {**created, "status": {"phase": "Running"}, "spec": {"minMember": 9}}
    )
    assert (updated["status"], updated["spec"]) == ({"phase": "Running"}, {"minMember": 2})
    del updated["metadata"]["resourceVersion"]
    code, body = await http.put(f"{PGS}/g", updated)
    assert (code, body["message"]) == (
        422,
        'PodGroup.scheduling.x-k8s.io "g" is invalid: metadata.resourceVersion: Invalid value: '
        "0x0: must be specified for an update",
    )
    code, body = await http.patch(
        f"{PGS}/g", {"spec": {"minMember": 3}}, "application/strategic-merge-patch+json"
    )
    assert (code, body["reason"]) == (415, "UnsupportedMediaType")


async def test_deleting_a_crd_stops_serving_it_and_ends_its_watches(http: Http) -> None:
    await http.post(CRDS, POD_GROUP_CRD)
    await http.post(PGS, pod_group("g"))
    watching = asyncio.ensure_future(http.watch(PGS, resourceVersion="0", timeoutSeconds="5"))
    await asyncio.sleep(0.2)
    assert (await http.delete(f"{CRDS}/podgroups.scheduling.x-k8s.io"))[0] == 200
    events = await asyncio.wait_for(watching, 2)
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]
    assert (await http.get(PGS))[0] == 404
    _, groups = await http.get("/apis")
    assert "scheduling.x-k8s.io" not in {g["name"] for g in groups["groups"]}


async def test_cluster_scoped_crd_is_served_without_namespace(http: Http) -> None:
    crd = copy.deepcopy(POD_GROUP_CRD)
    crd["metadata"]["name"] = "queues.scheduling.x-k8s.io"
    crd["spec"]["scope"] = "Cluster"
    crd["spec"]["names"] = {"kind": "Queue", "plural": "queues"}
    await http.post(CRDS, crd)
    code, _ = await http.post(f"{PG_GV}/queues", {"metadata": {"name": "q"}})
    assert code == 201
    assert (await http.get(f"{PG_GV}/namespaces/default/queues"))[0] == 404


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        pytest.param(
            "/apis/scheduling.k8s.io/v1alpha1/namespaces/default/workloads",
            "Workload",
            id="v1alpha1 Workload",
        ),
        pytest.param(
            "/apis/scheduling.k8s.io/v1alpha2/namespaces/default/workloads",
            "Workload",
            id="v1alpha2 Workload",
        ),
        pytest.param(
            "/apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups",
            "PodGroup",
            id="v1alpha2 PodGroup",
        ),
        pytest.param(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases", "Lease", id="leases"
        ),
    ],
)
async def test_builtin_generic_kinds_are_served(http: Http, path: str, kind: str) -> None:
    code, created = await http.post(path, {"metadata": {"name": "x"}, "spec": {}})
    assert (code, created["kind"]) == (201, kind)
    assert created["apiVersion"] == path.split("/")[2] + "/" + path.split("/")[3]


async def test_kubernetes_asyncio_custom_objects_with_merge_patch(
    http: Http, kube: client.ApiClient
) -> None:
    await http.post(CRDS, POD_GROUP_CRD)
    api = client.CustomObjectsApi(kube)
    await api.create_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", "default", "podgroups", pod_group("g")
    )
    await api.patch_namespaced_custom_object_status(
        "scheduling.x-k8s.io",
        "v1alpha1",
        "default",
        "podgroups",
        "g",
        {"status": {"phase": "Scheduling"}},
        _content_type="application/merge-patch+json",
    )
    got = await api.get_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", "default", "podgroups", "g"
    )
    assert got["status"] == {"phase": "Scheduling"}
