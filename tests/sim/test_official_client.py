"""The official ``kubernetes`` Python client (synchronous, generated models that validate
required fields) against a SimCluster: nodes deserialize with a complete status, pods are
created, listed and watched."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch
from troupe.sim import NodeSpec, SimCluster

from tests.sim.conftest import pod


@pytest.fixture
async def sim() -> AsyncIterator[SimCluster]:
    async with SimCluster([NodeSpec(2), NodeSpec(1, name_prefix="big", cpu="64")]) as cluster:
        yield cluster


@pytest.fixture
def core(sim: SimCluster, tmp_path: Path) -> client.CoreV1Api:
    api_client = config.new_client_from_config(str(sim.write_kubeconfig(tmp_path / "kc")))
    return client.CoreV1Api(api_client)


async def test_list_node_parses_every_node(core: client.CoreV1Api) -> None:
    nodes = (await asyncio.to_thread(core.list_node)).items
    assert sorted(n.metadata.name for n in nodes) == ["big-0", "node-0", "node-1"]
    for node in nodes:
        info = node.status.node_info
        assert info.os_image and info.kernel_version and info.kubelet_version
        assert info.machine_id and info.system_uuid and info.boot_id
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        assert [(c.status, c.reason) for c in ready] == [("True", "KubeletReady")]
        assert ready[0].last_heartbeat_time is not None
    addresses = {n.metadata.name: {a.type: a.address for a in n.status.addresses} for n in nodes}
    internal = [a["InternalIP"] for a in addresses.values()]
    assert len(set(internal)) == 3  # distinct even across name prefixes
    assert addresses["node-0"]["Hostname"] == "node-0"
    # The identifiers are stable per node name, distinct between nodes.
    assert len({n.status.node_info.machine_id for n in nodes}) == 3


async def test_create_list_and_watch_pods(core: client.CoreV1Api) -> None:
    created = await asyncio.to_thread(core.create_namespaced_pod, "default", pod("first"))
    assert created.status.phase == "Pending"
    listed = await asyncio.to_thread(core.list_namespaced_pod, "default")
    assert [p.metadata.name for p in listed.items] == ["first"]

    seen: list[tuple[str, str]] = []

    def follow() -> None:
        stream = watch.Watch()
        for event in stream.stream(
            core.list_namespaced_pod,
            "default",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=5,
        ):
            obj: Any = event["object"]
            seen.append((event["type"], obj.metadata.name))
            if event["type"] == "DELETED":
                stream.stop()

    following = asyncio.ensure_future(asyncio.to_thread(follow))
    await asyncio.to_thread(core.create_namespaced_pod, "default", pod("second"))
    await asyncio.to_thread(core.delete_namespaced_pod, "second", "default")
    await asyncio.wait_for(following, 10)
    assert seen == [("ADDED", "second"), ("DELETED", "second")]
