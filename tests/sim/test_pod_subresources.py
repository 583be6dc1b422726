"""pods/binding, pods/eviction and deletes against the embedded API server, each case
checked against upstream's registry (BindingREST, EvictionREST, graceful deletion,
delete preconditions, finalizers)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import client
from troupe.api.clock import FakeClock
from troupe.sim.apiserver import ApiServer

from tests.sim.conftest import Http, pod, status

PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
BUDGET_MESSAGE = "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"
CREATED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def binding(name: str, node: str, uid: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if uid is not None:
        meta["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


async def test_binding_sets_node_and_scheduled_condition_in_one_write(http: Http) -> None:
    _, created = await http.post(PODS, pod("a"))
    uid = created["metadata"]["uid"]
    assert await http.post(f"{PODS}/a/binding", binding("a", "n1", uid)) == (201, CREATED)
    _, bound = await http.get(f"{PODS}/a")
    assert bound["spec"]["nodeName"] == "n1"
    assert [(c["type"], c["status"]) for c in bound["status"]["conditions"]] == [
        ("PodScheduled", "True")
    ]
    assert (
        int(bound["metadata"]["resourceVersion"]) == int(created["metadata"]["resourceVersion"]) + 1
    )


BINDING_ERRORS = [
    pytest.param(
        "bound-elsewhere",
        lambda uid: binding("a", "n2", uid),
        status(
            409,
            "Conflict",
            'Operation cannot be fulfilled on pods/binding "a": pod a is already assigned to '
            'node "n1"',
            {"name": "a", "kind": "pods/binding"},
        ),
        id="binding an already bound pod is a conflict on pods/binding",
    ),
    pytest.param(
        "unbound",
        lambda uid: binding("a", "n2", "0000-other"),
        status(
            409,
            "Conflict",
            'Operation cannot be fulfilled on pods "a": StorageError: invalid object, Code: 4, '
            "Key: /registry/pods/default/a, ResourceVersion: 0, AdditionalErrorMsg: Precondition "
            "failed: UID in precondition: 0000-other, UID in object meta: {uid}",
            {"name": "a", "kind": "pods"},
        ),
        id="a binding for a recreated pod (other UID) fails the storage precondition",
    ),
    pytest.param(
        "missing",
        lambda uid: binding("a", "n2"),
        status(404, "NotFound", 'pods "a" not found', {"name": "a", "kind": "pods"}),
        id="binding a pod that is gone is not found",
    ),
]


@pytest.mark.parametrize(("state", "body", "expected"), BINDING_ERRORS)
async def test_binding_errors(http: Http, state: str, body: Any, expected: dict[str, Any]) -> None:
    uid = ""
    if state != "missing":
        _, created = await http.post(PODS, pod("a"))
        uid = created["metadata"]["uid"]
    if state == "bound-elsewhere":
        await http.post(f"{PODS}/a/binding", binding("a", "n1", uid))
    expected = {**expected, "message": expected["message"].replace("{uid}", uid)}
    assert await http.post(f"{PODS}/a/binding", body(uid)) == (expected["code"], expected)


async def test_binding_a_pod_being_deleted_is_a_conflict(http: Http) -> None:
    await http.post(PODS, {**pod("a"), "metadata": {"name": "a", "finalizers": ["x/y"]}})
    await http.delete(f"{PODS}/a")
    code, body = await http.post(f"{PODS}/a/binding", binding("a", "n1"))
    assert (code, body["message"]) == (
        409,
        'Operation cannot be fulfilled on pods/binding "a": pod a is being deleted, cannot be '
        "assigned to a host",
    )


async def test_kubernetes_asyncio_binding_needs_raw_response(
    http: Http, kube: client.ApiClient
) -> None:
    _, created = await http.post(PODS, pod("a"))
    v1 = client.CoreV1Api(kube)
    response = await v1.create_namespaced_pod_binding(
        "a", "default", binding("a", "n1", created["metadata"]["uid"]), _preload_content=False
    )
    assert response.status == 201
    assert (await v1.read_namespaced_pod("a", "default")).spec.node_name == "n1"


async def running_pods(http: Http, *names: str) -> None:
    for name in names:
        _, created = await http.post(PODS, pod(name, {"app": "web"}, nodeName="n1"))
        ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        await http.put(f"{PODS}/{name}/status", {**created, "status": ready})


def eviction(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"},
    }


def pdb(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-pdb"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }


EVICTIONS = [
    pytest.param({"minAvailable": 2}, 429, id="minAvailable 2 of 2 healthy refuses"),
    pytest.param({"maxUnavailable": 0}, 429, id="maxUnavailable 0 refuses"),
    pytest.param({"minAvailable": "50%"}, 201, id="minAvailable 50% of 2 allows one"),
    pytest.param({"maxUnavailable": 1}, 201, id="maxUnavailable 1 allows one"),
]


@pytest.mark.parametrize(("spec", "code"), EVICTIONS)
async def test_eviction_respects_disruption_budgets(
    http: Http, spec: dict[str, Any], code: int
) -> None:
    await running_pods(http, "a", "b")
    await http.post(PDBS, pdb(spec))
    got, body = await http.post(f"{PODS}/a/eviction", eviction("a"))
    assert got == code
    if code == 429:
        assert body == status(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            {"causes": [{"reason": "DisruptionBudget", "message": BUDGET_MESSAGE}]},
        )
    else:
        _, evicted = await http.get(f"{PODS}/a")
        assert evicted["metadata"]["deletionGracePeriodSeconds"] == 30


async def test_pending_pods_are_evicted_regardless_of_budgets(http: Http) -> None:
    await http.post(PODS, pod("p", {"app": "web"}))
    await http.post(PDBS, pdb({"maxUnavailable": 0}))
    assert await http.post(f"{PODS}/p/eviction", eviction("p")) == (201, CREATED)
    assert (await http.get(f"{PODS}/p"))[0] == 404


async def test_unbound_pod_delete_is_immediate_and_returns_the_object(http: Http) -> None:
    await http.post(PODS, pod("a"))
    code, body = await http.delete(f"{PODS}/a")
    assert (code, body["kind"], body["metadata"]["name"]) == (200, "Pod", "a")
    assert (await http.get(f"{PODS}/a"))[0] == 404


async def test_bound_pod_delete_is_graceful_until_grace_zero(http: Http) -> None:
    await http.post(PODS, pod("a", nodeName="n1", terminationGracePeriodSeconds=20))
    code, body = await http.delete(f"{PODS}/a")
    assert code == 200
    assert body["metadata"]["deletionGracePeriodSeconds"] == 20
    assert "deletionTimestamp" in body["metadata"]
    assert (await http.get(f"{PODS}/a"))[0] == 200
    await http.delete(
        f"{PODS}/a", {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    )
    assert (await http.get(f"{PODS}/a"))[0] == 404


async def test_server_finishes_graceful_deletes_after_the_grace_period() -> None:
    clock = FakeClock()
    server = ApiServer(clock=clock)
    store = server.store
    store.create("pods", pod("a", nodeName="n1", terminationGracePeriodSeconds=5))
    store.delete("pods", "a", "default")
    await asyncio.sleep(0)
    clock.advance(4)
    await asyncio.sleep(0)
    assert store.find(store.resolve("pods"), "default", "a") is not None
    clock.advance(1)
    for _ in range(3):
        await asyncio.sleep(0)
    assert store.find(store.resolve("pods"), "default", "a") is None
    await server.stop()


async def test_delete_precondition_uid_mismatch_is_a_conflict(http: Http) -> None:
    _, created = await http.post(PODS, pod("a"))
    body = {"preconditions": {"uid": "other"}}
    expected = status(
        409,
        "Conflict",
        'Operation cannot be fulfilled on Pod "a": the UID in the precondition (other) does not '
        f"match the UID in record ({created['metadata']['uid']}). The object might have been "
        "deleted and then recreated",
        {"name": "a", "kind": "Pod"},
    )
    assert await http.delete(f"{PODS}/a", body) == (409, expected)


async def test_delete_of_a_kind_without_deleted_object_returns_success_status(http: Http) -> None:
    _, created = await http.post(
        "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}}
    )
    code, body = await http.delete(
        "/api/v1/namespaces/default/configmaps/c", propagationPolicy="Background"
    )
    assert (code, body) == (
        200,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": "c", "kind": "configmaps", "uid": created["metadata"]["uid"]},
        },
    )


async def test_finalizers_hold_deletion_until_removed(http: Http) -> None:
    await http.post(PODS, {**pod("a"), "metadata": {"name": "a", "finalizers": ["x/y"]}})
    _, pending = await http.delete(f"{PODS}/a")
    assert "deletionTimestamp" in pending["metadata"]
    await http.patch(
        f"{PODS}/a", {"metadata": {"finalizers": None}}, "application/merge-patch+json"
    )
    assert (await http.get(f"{PODS}/a"))[0] == 404


async def test_delete_collection_uses_selectors(http: Http) -> None:
    for name, labels in (("a", {"app": "x"}), ("b", {"app": "x"}), ("c", {"app": "y"})):
        await http.post(PODS, pod(name, labels))
    code, body = await http.delete(PODS, labelSelector="app=x")
    assert (code, body["kind"], [i["metadata"]["name"] for i in body["items"]]) == (
        200,
        "PodList",
        ["a", "b"],
    )
    _, left = await http.get(PODS)
    assert [i["metadata"]["name"] for i in left["items"]] == ["c"]


async def test_deleting_a_namespace_deletes_its_objects(http: Http) -> None:
    await http.post("/api/v1/namespaces", {"metadata": {"name": "team"}})
    await http.post("/api/v1/namespaces/team/pods", pod("a"))
    assert (await http.delete("/api/v1/namespaces/team"))[0] == 200
    assert (await http.get("/api/v1/namespaces/team/pods/a"))[0] == 404


async def test_system_namespaces_cannot_be_deleted(http: Http) -> None:
    expected = status(
        403,
        "Forbidden",
        'namespaces "default" is forbidden: this namespace may not be deleted',
        {"name": "default", "kind": "namespaces"},
    )
    assert await http.delete("/api/v1/namespaces/default") == (403, expected)
