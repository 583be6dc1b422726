"""A client's malformed write cannot stop troupe: the embedded API server refuses what
kube-apiserver refuses, so nothing it stores breaks the informers' lists and watches.
Before, a pod with an unknown field nested 300 deep was stored (and answered 500);
every list of pods then failed, the running scheduler stopped binding and a restarted
one never synced."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import aiohttp
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod


async def post(cluster: SimCluster, body: bytes, content_type: str) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{cluster.server.url}/api/v1/namespaces/default/pods",
            data=body,
            headers={"Content-Type": content_type},
        ) as response,
    ):
        return response.status


def deep_pod(name: str, depth: int) -> dict[str, Any]:
    nested: Any = "x"
    for _ in range(depth):
        nested = {"a": nested}
    hostile = pod(name)
    hostile["spec"]["unknown"] = nested
    return hostile


async def test_hostile_writes_are_refused_and_troupe_keeps_binding_and_syncing(
    cluster: SimCluster, start_daemon: Callable[..., Any]
) -> None:
    bindings = Bindings(cluster)
    first = await start_daemon()
    assert (
        await post(cluster, json.dumps(deep_pod("deep", 300)).encode(), "application/json") == 400
    )
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
    )
    assert await post(cluster, bomb.encode(), "application/yaml") == 400
    assert await post(cluster, json.dumps(pod("ok")).encode(), "application/json") == 201
    await eventually(lambda: "default/ok" in bindings.node, timeout=30, what="the valid pod bound")
    # A scheduler started now lists every pod and syncs.
    await first.stop(grace=1)
    await start_daemon()
    assert await post(cluster, json.dumps(pod("later")).encode(), "application/json") == 201
    await eventually(
        lambda: "default/later" in bindings.node, timeout=30, what="the restarted one binds"
    )
    assert {p["metadata"]["name"] for p in cluster.store.list("pods")} == {"ok", "later"}
