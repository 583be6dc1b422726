"""How long the daemon takes to start: connect, discover, list every informer.

``python -m bench startup [--nodes 1000] [--runs 9] [--watching N]``

Each run starts a fresh embedded cluster (``SimCluster``, ``--nodes`` nodes) in this
process, then times ``SchedulerDaemon.start()`` with the default profile: the
reachability check, gang API discovery, the informers' first lists, until the
scheduling loop is started. ``--watching N`` adds a plugin to the default profile that
watches ConfigMaps (``troupe.api.watches``) and N ConfigMaps to list, so the figure
shows what a plugin-owned informer adds (one discovery request and one list); without
it no plugin watches anything and the daemon makes no request for such informers.
Figures: the median and minimum of ``--runs`` starts, in milliseconds, and how many
ConfigMaps the plugin held when ``start()`` returned. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from troupe.api.config import config_document, load_config
from troupe.api.cycle import CycleState
from troupe.api.framework import Handle, PreFilterResult
from troupe.api.nodetable import NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.api.watches import ObjectKind, ObjectStore, ObjectWatch, RawObject
from troupe.plugins.registry import Registry, catalog, default_registry, plugin_spec
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec

CONFIG_MAPS = ObjectKind("", "v1", "configmaps", "ConfigMap", True)


class WatchesConfigMaps:
    """A plugin that watches ConfigMaps and schedules nothing differently (its PreFilter,
    which puts it in the profile, SKIPs)."""

    name = "WatchesConfigMaps"

    def __init__(self, args: BaseModel | None, handle: Handle) -> None:
        self.store: ObjectStore[RawObject] = ObjectStore(CONFIG_MAPS)

    def watched_objects(self) -> Sequence[ObjectWatch[Any]]:
        return [self.store.watch(RawObject)]

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        return None, Status(Code.SKIP)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument(
        "--watching", type=int, default=None, metavar="N", help="a ConfigMap-watching plugin"
    )


def _registry(watching: bool) -> Registry:
    registry = default_registry()
    if watching:
        registry.register(plugin_spec(WatchesConfigMaps, in_default_profile=True))
    return registry


async def start_once(nodes: int, watching: int | None) -> tuple[float, int]:
    """Seconds ``SchedulerDaemon.start()`` took against a fresh cluster, and how many
    ConfigMaps the watching plugin held when it returned."""
    cluster = SimCluster([NodeSpec(count=nodes, cpu="4", memory="16Gi")])
    await cluster.start()
    for i in range(watching or 0):
        cluster.store.create("configmaps", {"metadata": {"name": f"cm-{i}"}, "data": {}})
    registry = _registry(watching is not None)
    resolved = load_config(config_document(), catalog(registry))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = cluster.write_kubeconfig(Path(tmp) / "kubeconfig")
            daemon = SchedulerDaemon(
                resolved,
                Connection(kubeconfig=str(kubeconfig)),
                registry=registry,
                seed=1,
                sync_timeout=120,
            )
            started = time.perf_counter()
            await daemon.start()
            took = time.perf_counter() - started
            assert daemon.wired is not None
            listed = sum(
                len(plugin.store)
                for fwk in daemon.wired.profiles.values()
                for plugin in fwk.plugins.values()
                if isinstance(plugin, WatchesConfigMaps)
            )
            await daemon.stop(grace=1)
            return took, listed
    finally:
        await cluster.stop()


async def measure(nodes: int, runs: int, watching: int | None) -> dict[str, Any]:
    starts = [await start_once(nodes, watching) for _ in range(runs)]
    times = [took for took, _ in starts]
    return {
        "nodes": nodes,
        "watching": watching,
        "runs": runs,
        # ConfigMaps the plugin held once start() returned, in the last run.
        "listed_at_start": starts[-1][1],
        "median_ms": round(statistics.median(times) * 1000, 1),
        "min_ms": round(min(times) * 1000, 1),
    }


def run(args: argparse.Namespace) -> int:
    result = asyncio.run(measure(args.nodes, args.runs, args.watching))
    print(json.dumps(result))
    return 0
