"""The in-process store API (no HTTP): the same semantics and the same watch events as
HTTP writes, private copies for callers, subscriptions and listeners."""

from __future__ import annotations

import asyncio

import pytest
from troupe.sim.apiserver import ApiError, ApiServer

from tests.sim.conftest import Http, pod

PODS = "/api/v1/namespaces/default/pods"


async def test_returned_objects_are_private_copies(server: ApiServer) -> None:
    store = server.store
    created = store.create("pods", pod("a"))
    created["metadata"]["labels"] = {"mutated": "yes"}
    assert store.get("pods", "a", "default")["metadata"]["labels"] == {}


async def test_create_get_list_update_delete_round_trip(server: ApiServer) -> None:
    store = server.store
    store.create("pods", pod("a", {"app": "web"}))
    store.create("pods", pod("b", {"app": "db"}))
    assert [p["metadata"]["name"] for p in store.list("pods", label_selector="app=web")] == ["a"]
    assert [p["metadata"]["name"] for p in store.list("pods", label_selector={"app": "db"})] == [
        "b"
    ]
    current = store.get("pods", "a", "default")
    current["metadata"]["labels"]["tier"] = "fe"
    updated = store.update("pods", current)
    assert updated["metadata"]["labels"] == {"app": "web", "tier": "fe"}
    with pytest.raises(ApiError) as stale:
        store.update("pods", current)
    assert (stale.value.code, stale.value.reason) == (409, "Conflict")
    last, gone = store.delete("pods", "a", "default")
    assert gone and last["metadata"]["name"] == "a"
    with pytest.raises(ApiError) as missing:
        store.get("pods", "a", "default")
    assert missing.value.status["message"] == 'pods "a" not found'


async def test_patch_status_merges_conditions_for_builtin_kinds(server: ApiServer) -> None:
    store = server.store
    store.create("pods", pod("a"))
    store.patch_status(
        "pods", "a", {"conditions": [{"type": "PodScheduled", "status": "False"}]}, "default"
    )
    patched = store.patch_status(
        "pods", "a", {"conditions": [{"type": "Ready", "status": "True"}]}, "default"
    )
    assert [c["type"] for c in patched["status"]["conditions"]] == ["PodScheduled", "Ready"]
    assert patched["status"]["phase"] == "Pending"


@pytest.mark.parametrize(
    ("path", "body", "expected_status"),
    [
        pytest.param(
            PODS,
            {**pod("a"), "status": {"phase": "Running"}},
            {"phase": "Pending"},
            id="pods start Pending",
        ),
        pytest.param(
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            {"metadata": {"name": "a"}, "spec": {}, "status": {"disruptionsAllowed": 3}},
            None,
            id="a PDB starts without status",
        ),
        pytest.param(
            "/api/v1/nodes",
            {"metadata": {"name": "a"}, "status": {"capacity": {"cpu": "1"}}},
            {"capacity": {"cpu": "1"}},
            id="a node keeps the status it registers with",
        ),
    ],
)
async def test_status_on_create(
    http: Http, path: str, body: dict, expected_status: dict | None
) -> None:
    _, created = await http.post(path, body)
    assert created.get("status") == expected_status


async def test_subscription_sees_http_writes_like_a_watch(server: ApiServer, http: Http) -> None:
    store = server.store
    store.create("pods", pod("before"))
    seen: list[tuple[str, str]] = []

    async def follow() -> None:
        async with store.subscribe("pods", label_selector="app=web", initial=True) as pods:
            async for type_, obj in pods:
                seen.append((type_, obj["metadata"]["name"]))
                if len(seen) == 3:
                    return

    following = asyncio.ensure_future(follow())
    await http.post(PODS, pod("web", {"app": "web"}))
    await http.patch(
        f"{PODS}/web", {"metadata": {"labels": {"app": "x"}}}, "application/merge-patch+json"
    )
    await http.patch(
        f"{PODS}/web", {"metadata": {"labels": {"app": "web"}}}, "application/merge-patch+json"
    )
    await asyncio.wait_for(following, 2)
    assert seen == [("ADDED", "web"), ("DELETED", "web"), ("ADDED", "web")]


async def test_listeners_are_called_synchronously_until_stopped(server: ApiServer) -> None:
    store = server.store
    calls: list[tuple[str, str]] = []
    stop = store.listen("pods", lambda type_, obj: calls.append((type_, obj["metadata"]["name"])))
    store.create("pods", pod("a"))
    store.delete("pods", "a", "default")
    stop()
    store.create("pods", pod("b"))
    assert calls == [("ADDED", "a"), ("DELETED", "a")]
