"""Distinct taints over time: memory and time per change as timestamp taints churn.

``python -m bench taints [--nodes 5000] [--values 10000] [--carriers 250]`` builds a
scheduler cache of ``--nodes`` nodes in this process and then, ``--values`` times,
gives the next node (round robin) a taint no node had before, as cluster-autoscaler
does with ``DeletionCandidateOfClusterAutoscaler=<timestamp>:PreferNoSchedule`` and
``ToBeDeletedByClusterAutoscaler=<timestamp>:NoSchedule`` (alternately), and takes
it off the node that got one ``--carriers`` changes earlier: at most that many nodes
carry such a taint at a time, each its own value. After each change one pod runs
TaintToleration's PreFilter and PreScore, as the next scheduling cycle would (their
per-generation refresh is part of what a new taint costs).

Each ``--window`` changes it prints one line: the median and p90 microseconds per
change (the cache's node updates, then the plugin's two points, then both), the
taint matrix's rows and megabytes, the number of taint ids handed out, and this
process's resident memory (``/proc/self/statm``). Building the Node objects is not
timed. With taints interned and freed, all of these stay flat once
``--carriers`` values are live; a table that keeps every value ever seen grows its
matrix by ``nodes`` bytes per value and copies it on every new one. The last line is
one JSON object with the first and last windows.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from typing import Any, cast

import numpy as np
from troupe.api.clock import FakeClock
from troupe.api.cycle import CycleState
from troupe.api.framework import Handle
from troupe.api.objects import Node, Pod
from troupe.api.podinfo import PodInfo
from troupe.plugins.tainttoleration.taint_toleration import TaintToleration
from troupe.scheduler.cache import Cache

from bench.churn import rss_mb

_AUTOSCALER_TAINTS = (
    ("DeletionCandidateOfClusterAutoscaler", "PreferNoSchedule"),
    ("ToBeDeletedByClusterAutoscaler", "NoSchedule"),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--values", type=int, default=10_000, help="distinct taint values added")
    p.add_argument("--carriers", type=int, default=250, help="nodes tainted at a time")
    p.add_argument("--window", type=int, default=1000, help="changes per printed line")


def node(name: str, taint: tuple[str, str, str] | None) -> Node:
    taints = [] if taint is None else [{"key": taint[0], "value": taint[1], "effect": taint[2]}]
    resources = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    return Node.model_validate(
        {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": taints},
            "status": {"capacity": resources, "allocatable": resources},
        }
    )


class Churn:
    """The cache, the plugin and a pod; ``change(i)`` adds value ``i``."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.names = [f"node-{i}" for i in range(args.nodes)]
        self.cache = Cache(FakeClock())
        for name in self.names:
            self.cache.add_node(node(name, None))
        self.plugin = TaintToleration(None, cast(Handle, None))
        pod = Pod.model_validate({"metadata": {"name": "p", "namespace": "default"}})
        self.pod = PodInfo.of(pod)

    def change(self, i: int) -> tuple[float, float]:
        """Seconds spent updating the cache, then in the plugin."""
        key, effect = _AUTOSCALER_TAINTS[i % 2]
        stamp = str(1_800_000_000 + i)  # seconds since the epoch, one per value
        updates = [node(self.names[i % len(self.names)], (key, stamp, effect))]
        if i >= self.args.carriers:
            untaint = (i - self.args.carriers) % len(self.names)
            updates.append(node(self.names[untaint], None))
        began = time.perf_counter()
        for update in updates:
            self.cache.update_node(update)
        updated = time.perf_counter()
        table = self.cache.table
        state = CycleState()
        self.plugin.pre_filter(state, self.pod, table)
        self.plugin.pre_score(state, self.pod, table, table.slots())
        return updated - began, time.perf_counter() - updated


def _us(seconds: list[float], q: float) -> float:
    return round(float(np.percentile(seconds, q)) * 1e6, 1)


def window(churn: Churn, start: int, timings: list[tuple[float, float]]) -> dict[str, Any]:
    gc.collect()
    table = churn.cache.table
    update = [u for u, _ in timings]
    plugin = [p for _, p in timings]
    total = [u + p for u, p in timings]
    return {
        "values": start + len(timings),
        "update_us_median": _us(update, 50),
        "plugin_us_median": _us(plugin, 50),
        "change_us_median": _us(total, 50),
        "change_us_p90": _us(total, 90),
        "taint_rows": int(table.taints.shape[0]),
        "taint_ids": len(table.taint_list),
        "taint_matrix_mb": round(table.taints.nbytes / 2**20, 2),
        "rss_mb": round(rss_mb(), 1),
    }


def run(args: argparse.Namespace) -> int:
    churn = Churn(args)
    gc.collect()
    print(f"{args.nodes} nodes, rss {rss_mb():.1f} MB", flush=True)
    lines = []
    for start in range(0, args.values, args.window):
        timings = [churn.change(i) for i in range(start, min(start + args.window, args.values))]
        line = window(churn, start, timings)
        lines.append(line)
        print(" ".join(f"{k}={v}" for k, v in line.items()), flush=True)
    result = {
        "nodes": args.nodes,
        "values": args.values,
        "carriers": args.carriers,
        "first": lines[0],
        "last": lines[-1],
    }
    print(json.dumps(result), flush=True)
    return 0
