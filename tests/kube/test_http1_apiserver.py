"""``KubeClient``'s writes and reads over the ``http1`` pool against the embedded API
server, each scenario under the default event loop and under uvloop (its own loop,
so the test functions are synchronous); watches stay on aiohttp beside the pool."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvloop
from kubernetes_asyncio.client import ApiClient
from troupe.api.client import ApiError, Event, ObjectRef
from troupe.api.clock import RealClock
from troupe.api.objects import Pod, PodCondition
from troupe.kube import HttpTransport, KubeClient, connect
from troupe.kube.http1 import Http1Pool
from troupe.kube.http1_pools import pool_for
from troupe.sim.apiserver.server import ApiServer

NS = "default"


@dataclass
class Setup:
    server: ApiServer
    api: ApiClient
    http: HttpTransport
    client: KubeClient

    @property
    def pool(self) -> Http1Pool:
        pool = pool_for(self.api)
        assert pool is not None
        return pool

    async def create_pod(self, name: str, labels: dict[str, str] | None = None) -> Pod:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
            "spec": {
                "schedulerName": "troupe-scheduler",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        }
        resp = await self.http.request(
            "POST", f"/api/v1/namespaces/{NS}/pods", body=json.dumps(body).encode()
        )
        assert resp.status == 201, resp.body
        return Pod.model_validate_json(resp.body)

    async def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
        resp = await self.http.request("GET", path, query=query)
        assert resp.ok, resp.body
        return dict(json.loads(resp.body))


@asynccontextmanager
async def cluster(tmp_path: Path) -> AsyncIterator[Setup]:
    async with ApiServer(bookmark_interval=30.0) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        api = await connect(str(kubeconfig), None, False, pool_size=4)
        client = KubeClient(
            api,
            RealClock(),
            qps=-1,
            burst=100,
            scheduler_name="troupe-scheduler",
            instance="test-host",
        )
        try:
            yield Setup(server, api, HttpTransport(api), client)
        finally:
            await api.close()


async def bind_patch_event_and_get_round_trip(setup: Setup) -> None:
    pod = await setup.create_pod("p")
    await setup.client.bind(pod, "n1")
    cond = PodCondition(type="PodScheduled", status="True")
    await setup.client.patch_pod_status(pod, cond, None)
    await setup.client.record_event(
        Event(ObjectRef.of_pod(pod), "Normal", "Scheduled", "Binding", "assigned to n1")
    )
    got = await setup.get(f"/api/v1/namespaces/{NS}/pods/p")
    assert got["spec"]["nodeName"] == "n1"
    assert {"type": "PodScheduled", "status": "True"}.items() <= got["status"]["conditions"][
        0
    ].items()
    events = await setup.get(f"/apis/events.k8s.io/v1/namespaces/{NS}/events")
    assert [e["reason"] for e in events["items"]] == ["Scheduled"]
    with pytest.raises(ApiError) as err:
        await setup.client.bind(pod, "n2")
    assert err.value.status == 409
    assert setup.pool.connections >= 1


async def a_list_with_a_selector_reads_only_the_matching_pods(setup: Setup) -> None:
    for name, tier in (("a", "web"), ("b", "db"), ("c", "web")):
        await setup.create_pod(name, {"tier": tier})
    got = await setup.get("/api/v1/pods", {"labelSelector": "tier!=db", "limit": "10"})
    assert sorted(p["metadata"]["name"] for p in got["items"]) == ["a", "c"]


async def many_bindings_over_a_small_pool_each_land_once(setup: Setup) -> None:
    pods = [await setup.create_pod(f"p{i}") for i in range(60)]
    await asyncio.gather(*(setup.client.bind(p, f"n{i % 3}") for i, p in enumerate(pods)))
    got = await setup.get("/api/v1/pods")
    assert {p["metadata"]["name"]: p["spec"]["nodeName"] for p in got["items"]} == {
        f"p{i}": f"n{i % 3}" for i in range(60)
    }
    assert 1 <= setup.pool.connections <= setup.pool.limit


async def a_watch_on_aiohttp_sees_writes_made_over_the_pool(setup: Setup) -> None:
    async with setup.http.stream(
        "/api/v1/namespaces/default/pods", query={"watch": "true"}, timeout=10.0
    ) as stream:
        assert stream.status == 200
        pod = await setup.create_pod("w")
        await setup.client.bind(pod, "n1")
        seen: list[tuple[str, str]] = []
        async for line in stream.lines():
            event = json.loads(line)
            seen.append((event["type"], event["object"]["spec"].get("nodeName", "")))
            if len(seen) == 2:
                break
    assert seen == [("ADDED", ""), ("MODIFIED", "n1")]


Scenario = Callable[[Setup], Awaitable[None]]


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize(
    "scenario",
    [
        bind_patch_event_and_get_round_trip,
        a_list_with_a_selector_reads_only_the_matching_pods,
        many_bindings_over_a_small_pool_each_land_once,
        a_watch_on_aiohttp_sees_writes_made_over_the_pool,
    ],
    ids=lambda f: f.__name__.replace("_", " "),
)
def test_over_the_pool(scenario: Scenario, loop: str, tmp_path: Path) -> None:
    async def run() -> None:
        async with cluster(tmp_path) as setup:
            await scenario(setup)

    if loop == "uvloop":
        uvloop.run(run())
    else:
        asyncio.run(run())
