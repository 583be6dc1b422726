"""Create, get and list against the embedded API server over HTTP, checked against the
responses of the real kube-apiserver (defaults, Status bodies, list shapes, selectors,
pagination)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from troupe.sim.apiserver import ApiServer

from tests.sim.conftest import Http, pod, status

PODS = "/api/v1/namespaces/default/pods"
PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"


async def test_created_pod_carries_server_defaults(http: Http) -> None:
    code, body = await http.post(PODS, pod("web"))
    assert code == 201
    meta = body["metadata"]
    assert (body["kind"], body["apiVersion"]) == ("Pod", "v1")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"])
    assert meta["resourceVersion"].isdigit() and meta["generation"] == 1
    assert meta["namespace"] == "default"
    assert body["spec"]["schedulerName"] == "default-scheduler"
    assert body["spec"]["priority"] == 0
    assert body["status"]["phase"] == "Pending"


async def test_resource_versions_increase_across_kinds(http: Http) -> None:
    _, first = await http.post(PODS, pod("a"))
    _, cm = await http.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}})
    _, second = await http.post(PODS, pod("b"))
    rvs = [int(o["metadata"]["resourceVersion"]) for o in (first, cm, second)]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3


async def test_generate_name_appends_five_random_characters(http: Http) -> None:
    body = pod("")
    body["metadata"] = {"generateName": "worker-"}
    code, created = await http.post(PODS, body)
    assert code == 201
    assert re.fullmatch(r"worker-[a-z0-9]{5}", created["metadata"]["name"])


CREATE_ERRORS = [
    pytest.param(
        "/api/v1/namespaces/nope/pods",
        pod("p"),
        status(
            404, "NotFound", 'namespaces "nope" not found', {"name": "nope", "kind": "namespaces"}
        ),
        id="a pod in a namespace that does not exist is 404 on the namespace",
    ),
    pytest.param(
        PODS,
        pod("p", priorityClassName="gold"),
        status(
            403,
            "Forbidden",
            'pods "p" is forbidden: no PriorityClass with name gold was found',
            {"name": "p", "kind": "pods"},
        ),
        id="an unknown priorityClassName is forbidden by Priority admission",
    ),
    pytest.param(
        PODS,
        pod("p", priorityClassName="system-node-critical", priority=5),
        status(
            403,
            "Forbidden",
            'pods "p" is forbidden: the integer value of priority (5) must not be provided in '
            "pod spec; priority admission controller computed 2000001000 from the given "
            "PriorityClass name",
            {"name": "p", "kind": "pods"},
        ),
        id="a priority that disagrees with the class is forbidden",
    ),
    pytest.param(
        PODS,
        {"metadata": {"name": "p"}, "spec": {}},
        status(
            422,
            "Invalid",
            'Pod "p" is invalid: spec.containers: Required value',
            {
                "name": "p",
                "kind": "Pod",
                "causes": [
                    {
                        "reason": "FieldValueRequired",
                        "message": "Required value",
                        "field": "spec.containers",
                    }
                ],
            },
        ),
        id="a pod without containers is invalid",
    ),
]


@pytest.mark.parametrize(("path", "body", "expected"), CREATE_ERRORS)
async def test_create_errors_match_upstream(
    http: Http, path: str, body: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert await http.post(path, body) == (expected["code"], expected)


async def test_second_create_of_a_name_is_already_exists(http: Http) -> None:
    await http.post(PODS, pod("dup"))
    expected = status(
        409, "AlreadyExists", 'pods "dup" already exists', {"name": "dup", "kind": "pods"}
    )
    assert await http.post(PODS, pod("dup")) == (409, expected)


GET_MISSING = [
    pytest.param(
        f"{PODS}/ghost",
        status(404, "NotFound", 'pods "ghost" not found', {"name": "ghost", "kind": "pods"}),
        id="a missing pod names the core resource",
    ),
    pytest.param(
        f"{PCS}/ghost",
        status(
            404,
            "NotFound",
            'priorityclasses.scheduling.k8s.io "ghost" not found',
            {"name": "ghost", "group": "scheduling.k8s.io", "kind": "priorityclasses"},
        ),
        id="a missing priority class names its group",
    ),
]


@pytest.mark.parametrize(("path", "expected"), GET_MISSING)
async def test_get_missing_is_not_found(http: Http, path: str, expected: dict[str, Any]) -> None:
    assert await http.get(path) == (404, expected)


async def test_priority_comes_from_the_class_or_the_global_default(http: Http) -> None:
    await http.post(PCS, {"metadata": {"name": "high"}, "value": 1000})
    await http.post(PCS, {"metadata": {"name": "base"}, "value": 7, "globalDefault": True})
    _, explicit = await http.post(PODS, pod("explicit", priorityClassName="high"))
    _, defaulted = await http.post(PODS, pod("defaulted"))
    assert explicit["spec"]["priority"] == 1000
    assert (defaulted["spec"]["priority"], defaulted["spec"]["priorityClassName"]) == (7, "base")


async def test_list_has_list_kind_resource_version_and_typed_items(
    http: Http, server: ApiServer
) -> None:
    await http.post(PODS, pod("one"))
    code, body = await http.get("/api/v1/pods")
    assert code == 200
    assert (body["kind"], body["apiVersion"]) == ("PodList", "v1")
    assert body["metadata"]["resourceVersion"] == str(server.store.resource_version)
    assert [(i["kind"], i["apiVersion"], i["metadata"]["name"]) for i in body["items"]] == [
        ("Pod", "v1", "one")
    ]


LABELED = {"a": {"app": "web", "tier": "fe"}, "b": {"app": "web"}, "c": {"app": "db"}, "d": {}}

LABEL_SELECTORS = [
    pytest.param("app=web", ["a", "b"], id="equality"),
    pytest.param("app==web", ["a", "b"], id="double equals"),
    pytest.param("app!=web", ["c", "d"], id="inequality also matches pods without the label"),
    pytest.param("app in (db, web),tier", ["a"], id="set membership AND existence"),
    pytest.param("app notin (web)", ["c", "d"], id="notin matches missing labels"),
    pytest.param("!tier", ["b", "c", "d"], id="does not exist"),
    pytest.param("app", ["a", "b", "c"], id="exists"),
]


@pytest.mark.parametrize(("selector", "names"), LABEL_SELECTORS)
async def test_label_selectors_filter_lists(http: Http, selector: str, names: list[str]) -> None:
    for name, labels in LABELED.items():
        await http.post(PODS, pod(name, labels))
    code, body = await http.get(PODS, labelSelector=selector)
    assert code == 200
    assert [i["metadata"]["name"] for i in body["items"]] == names


FIELD_SELECTORS = [
    pytest.param("/api/v1/pods", "spec.nodeName=n1", 200, ["bound"], id="pods by node"),
    pytest.param("/api/v1/pods", "spec.nodeName=", 200, ["free"], id="unbound pods"),
    pytest.param("/api/v1/pods", "status.phase!=Pending", 200, [], id="pods by phase"),
    pytest.param(
        "/api/v1/pods",
        "metadata.name==free,spec.schedulerName=default-scheduler",
        200,
        ["free"],
        id="AND of name and scheduler",
    ),
    pytest.param(
        "/api/v1/pods",
        "spec.foo=x",
        400,
        status(400, "BadRequest", "field label not supported: spec.foo", None),
        id="an unknown pod field is a bad request in the pod conversion's words",
    ),
    pytest.param(
        "/api/v1/configmaps",
        "data.x=1",
        400,
        status(
            400,
            "BadRequest",
            '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"',
            None,
        ),
        id="an unknown field of a kind without conversions names the two meta fields",
    ),
]


@pytest.mark.parametrize(("path", "selector", "code", "expected"), FIELD_SELECTORS)
async def test_field_selectors(
    http: Http, path: str, selector: str, code: int, expected: Any
) -> None:
    await http.post(PODS, pod("bound", nodeName="n1"))
    await http.post(PODS, pod("free"))
    got_code, body = await http.get(path, fieldSelector=selector)
    assert got_code == code
    if code == 200:
        assert [i["metadata"]["name"] for i in body["items"]] == expected
    else:
        assert body == expected


async def test_limit_and_continue_page_through_a_consistent_snapshot(http: Http) -> None:
    for i in range(5):
        await http.post(PODS, pod(f"p{i}"))
    _, first = await http.get(PODS, limit="2")
    await http.post(PODS, pod("p9"))  # written after the first page: not in this list
    _, second = await http.get(PODS, limit="2", **{"continue": first["metadata"]["continue"]})
    _, third = await http.get(PODS, limit="2", **{"continue": second["metadata"]["continue"]})
    names = [[i["metadata"]["name"] for i in page["items"]] for page in (first, second, third)]
    assert names == [["p0", "p1"], ["p2", "p3"], ["p4"]]
    assert first["metadata"]["remainingItemCount"] == 3
    assert "continue" not in third["metadata"]
    assert first["metadata"]["resourceVersion"] == third["metadata"]["resourceVersion"]


async def test_continue_token_older_than_compaction_is_expired(
    http: Http, server: ApiServer
) -> None:
    for i in range(3):
        await http.post(PODS, pod(f"p{i}"))
    _, first = await http.get(PODS, limit="1")
    await http.post(PODS, pod("later"))
    server.faults.compact()
    code, body = await http.get(PODS, limit="1", **{"continue": first["metadata"]["continue"]})
    assert (code, body["reason"], body["code"]) == (410, "Expired", 410)
    assert body["message"].startswith(
        "The provided continue parameter is too old to display a consistent list result."
    )


async def test_garbage_continue_token_is_a_bad_request(http: Http) -> None:
    code, body = await http.get(PODS, limit="1", **{"continue": "not-a-token"})
    assert (code, body["reason"]) == (400, "BadRequest")


async def test_system_namespaces_and_priority_classes_exist_at_start(http: Http) -> None:
    _, namespaces = await http.get("/api/v1/namespaces")
    _, classes = await http.get(PCS)
    assert {"default", "kube-system", "kube-public"} <= {
        n["metadata"]["name"] for n in namespaces["items"]
    }
    assert {c["metadata"]["name"] for c in classes["items"]} == {
        "system-node-critical",
        "system-cluster-critical",
    }


async def test_create_accepts_yaml_and_refuses_protobuf(http: Http) -> None:
    manifest = "metadata: {name: cfg}\ndata: {a: b}\n"
    async with http.session.post(
        http.base + "/api/v1/namespaces/default/configmaps",
        data=manifest,
        headers={"Content-Type": "application/yaml"},
    ) as response:
        assert response.status == 201
        assert (await response.json())["data"] == {"a": "b"}
    async with http.session.post(
        http.base + "/api/v1/namespaces/default/configmaps",
        data=b"k8s\x00\n\x0f",
        headers={"Content-Type": "application/vnd.kubernetes.protobuf"},
    ) as response:
        assert response.status == 415
        body = await response.json()
    assert body["reason"] == "UnsupportedMediaType"
    assert "(application/vnd.kubernetes.protobuf)" in body["message"]
