"""PUT and PATCH against the embedded API server: optimistic concurrency, the status
subresource split, immutable spec.nodeName, and the three patch formats on pod
conditions, with upstream's status codes and messages."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.sim.conftest import Http, pod, status

PODS = "/api/v1/namespaces/default/pods"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
CONDITIONS = [
    {"type": "PodScheduled", "status": "True"},
    {"type": "Ready", "status": "False"},
]


async def make(http: Http, name: str = "a", **spec: Any) -> dict[str, Any]:
    _, created = await http.post(PODS, pod(name, **spec))
    _, with_status = await http.put(
        f"{PODS}/{name}/status",
        {**created, "status": {"phase": "Pending", "conditions": CONDITIONS}},
    )
    return with_status  # type: ignore[no-any-return]


async def test_put_with_a_stale_resource_version_is_a_conflict(http: Http) -> None:
    current = await make(http)
    await http.patch(f"{PODS}/a", {"metadata": {"labels": {"x": "1"}}}, MERGE)
    expected = status(
        409,
        "Conflict",
        'Operation cannot be fulfilled on pods "a": the object has been modified; please apply '
        "your changes to the latest version and try again",
        {"name": "a", "kind": "pods"},
    )
    assert await http.put(f"{PODS}/a", current) == (409, expected)


async def test_put_without_a_resource_version_is_unconditional(http: Http) -> None:
    current = await make(http)
    del current["metadata"]["resourceVersion"]
    current["metadata"]["labels"] = {"x": "2"}
    code, body = await http.put(f"{PODS}/a", current)
    assert (code, body["metadata"]["labels"]) == (200, {"x": "2"})


async def test_pod_put_ignores_status_and_status_put_ignores_the_rest(http: Http) -> None:
    current = await make(http)
    changed = {
        **current,
        "status": {"phase": "Running"},
        "metadata": {**current["metadata"], "labels": {"k": "v"}},
    }
    _, via_main = await http.put(f"{PODS}/a", changed)
    assert via_main["status"]["phase"] == "Pending" and via_main["metadata"]["labels"] == {"k": "v"}
    changed = {
        **via_main,
        "status": {"phase": "Running"},
        "metadata": {**via_main["metadata"], "labels": {}},
    }
    _, via_status = await http.put(f"{PODS}/a/status", changed)
    assert via_status["status"]["phase"] == "Running"
    assert via_status["metadata"]["labels"] == {"k": "v"}


async def test_spec_node_name_cannot_change_once_set(http: Http) -> None:
    current = await make(http, nodeName="n1")
    current["spec"]["nodeName"] = "n2"
    code, body = await http.put(f"{PODS}/a", current)
    assert (code, body["reason"], body["details"]["kind"]) == (422, "Invalid", "Pod")
    assert body["message"].startswith(
        'Pod "a" is invalid: spec: Forbidden: pod updates may not change fields other than'
    )


async def test_no_op_update_keeps_the_resource_version(http: Http) -> None:
    current = await make(http)
    _, again = await http.put(f"{PODS}/a", current)
    assert again["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]


async def test_spec_change_bumps_generation_but_status_does_not(http: Http) -> None:
    current = await make(http)
    assert current["metadata"]["generation"] == 1
    current["spec"]["activeDeadlineSeconds"] = 30
    _, updated = await http.put(f"{PODS}/a", current)
    assert updated["metadata"]["generation"] == 2


async def test_name_in_body_must_match_the_url(http: Http) -> None:
    current = await make(http)
    current["metadata"]["name"] = "b"
    expected = status(
        400, "BadRequest", "the name of the object (b) does not match the name on the URL (a)", None
    )
    assert await http.put(f"{PODS}/a", current) == (400, expected)


PATCHES = [
    pytest.param(
        MERGE,
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        [("Ready", "True")],
        id="merge patch replaces the whole conditions list",
    ),
    pytest.param(
        STRATEGIC,
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        [("PodScheduled", "True"), ("Ready", "True")],
        id="strategic merge patch merges conditions by type",
    ),
    pytest.param(
        STRATEGIC,
        {"status": {"conditions": [{"type": "DisruptionTarget", "status": "True"}]}},
        [("PodScheduled", "True"), ("Ready", "False"), ("DisruptionTarget", "True")],
        id="strategic merge patch appends a new condition type",
    ),
    pytest.param(
        STRATEGIC,
        {"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}},
        [("PodScheduled", "True")],
        id="strategic $patch delete removes the item with that key",
    ),
    pytest.param(
        STRATEGIC,
        {"status": {"conditions": [{"$patch": "replace"}, {"type": "X", "status": "True"}]}},
        [("X", "True")],
        id="strategic $patch replace replaces the list",
    ),
    pytest.param(
        JSON_PATCH,
        [{"op": "add", "path": "/status/conditions/-", "value": {"type": "X", "status": "True"}}],
        [("PodScheduled", "True"), ("Ready", "False"), ("X", "True")],
        id="json patch appends with -",
    ),
    pytest.param(
        JSON_PATCH,
        [
            {"op": "test", "path": "/status/conditions/1/type", "value": "Ready"},
            {"op": "replace", "path": "/status/conditions/1/status", "value": "True"},
        ],
        [("PodScheduled", "True"), ("Ready", "True")],
        id="json patch test then replace",
    ),
]


@pytest.mark.parametrize(("content_type", "body", "expected"), PATCHES)
async def test_status_patches_of_conditions(
    http: Http, content_type: str, body: Any, expected: list[tuple[str, str]]
) -> None:
    await make(http)
    code, patched = await http.patch(f"{PODS}/a/status", body, content_type)
    assert code == 200
    assert [(c["type"], c["status"]) for c in patched["status"]["conditions"]] == expected


PATCH_ERRORS = [
    pytest.param(
        JSON_PATCH,
        [{"op": "test", "path": "/metadata/name", "value": "b"}],
        422,
        "testing value /metadata/name failed: test failed",
        id="a failed json patch test is unprocessable",
    ),
    pytest.param(
        JSON_PATCH,
        [{"op": "remove", "path": "/metadata/labels/missing"}],
        422,
        'remove operation does not apply: doc is missing path: "/metadata/labels/missing": '
        "missing value",
        id="removing a missing path is unprocessable",
    ),
    pytest.param(
        JSON_PATCH,
        {"op": "add"},
        400,
        "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        id="a json patch that is not a list is a bad request",
    ),
    pytest.param(
        "text/plain",
        {},
        415,
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/apply-patch+yaml, application/strategic-merge-patch+json",
        id="other content types are unsupported",
    ),
    pytest.param(
        MERGE,
        {"metadata": {"resourceVersion": "1"}},
        409,
        'Operation cannot be fulfilled on pods "a": the object has been modified; please apply '
        "your changes to the latest version and try again",
        id="a stale resourceVersion in a patch is a conflict",
    ),
]


@pytest.mark.parametrize(("content_type", "body", "code", "message"), PATCH_ERRORS)
async def test_patch_errors(
    http: Http, content_type: str, body: Any, code: int, message: str
) -> None:
    await make(http)
    got, answer = await http.patch(f"{PODS}/a", body, content_type)
    assert (got, answer["code"], answer["message"]) == (code, code, message)


async def test_kubernetes_asyncio_status_patch_merges_conditions(
    http: Http, kube: client.ApiClient
) -> None:
    await make(http)
    v1 = client.CoreV1Api(kube)
    await v1.patch_namespaced_pod_status(
        "a", "default", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    current = await v1.read_namespaced_pod("a", "default")
    assert [(c.type, c.status) for c in current.status.conditions] == [
        ("PodScheduled", "True"),
        ("Ready", "True"),
    ]
