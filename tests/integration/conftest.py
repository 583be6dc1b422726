"""An embedded cluster and a troupe daemon talking to it over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from troupe.api.config import config_document, load_config
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec


async def eventually(
    check: Callable[[], bool], timeout: float = 10.0, what: str | Callable[[], str] = ""
) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out waiting for {said or check}")
        await asyncio.sleep(0.02)


def pod(
    name: str, cpu: str = "500m", scheduler: str = "troupe-scheduler", **extra: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", **extra.pop("metadata", {})},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}
            ],
            **extra,
        },
    }


class Bindings:
    """Counts every transition of a pod to bound, as the store commits it."""

    def __init__(self, cluster: SimCluster) -> None:
        self.count: dict[str, int] = {}
        self.node: dict[str, str] = {}
        self._seen: dict[str, str] = {}
        self.stop = cluster.store.listen("pods", self._on)

    def _on(self, type_: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}/{meta['uid']}"
        node = obj["spec"].get("nodeName", "")
        if type_ != "DELETED" and node and not self._seen.get(key):
            self.count[key] = self.count.get(key, 0) + 1
            self.node[f"{meta['namespace']}/{meta['name']}"] = node
        self._seen[key] = node

    def twice(self) -> list[str]:
        return [k for k, n in self.count.items() if n > 1]


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    c = SimCluster(
        [NodeSpec(count=3, cpu="4", memory="16Gi", zones=("zone-a", "zone-b"))],
        bookmark_interval=0.5,
    )
    await c.start()
    yield c
    await c.stop()


@pytest.fixture
async def start_daemon(cluster: SimCluster, tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Start troupe daemons against ``cluster``; all are stopped at teardown."""
    daemons: list[SchedulerDaemon] = []

    async def start(**config: Any) -> SchedulerDaemon:
        kubeconfig = cluster.write_kubeconfig(tmp_path / f"kubeconfig-{len(daemons)}")
        resolved = load_config(config_document(**config), catalog(default_registry()))
        daemon = SchedulerDaemon(
            resolved, Connection(kubeconfig=str(kubeconfig)), seed=1, sync_timeout=10
        )
        await daemon.start()
        daemons.append(daemon)
        return daemon

    yield start
    for daemon in daemons:
        await daemon.stop(grace=1)


@pytest.fixture
async def daemon(start_daemon: Callable[..., Any]) -> SchedulerDaemon:
    d: SchedulerDaemon = await start_daemon()
    return d
