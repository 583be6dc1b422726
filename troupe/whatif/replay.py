"""One replay: a snapshot loaded into an embedded cluster, the what-if changes
applied, troupe's daemon run with one profile until it is idle, and the outcome.

``troupe replay`` calls ``replay`` once per profile (twice with ``--compare``, each
on a fresh copy). The changes are applied in the order docs/replay.md gives:
``--remove-nodes``, ``--add-nodes`` (clones of ``--node-template``), ``--add``. The
pods replayed are the unbound pods of one of the profile's scheduler names; the
outcome (``troupe.sim.outcome``) says where they went, the gangs, the utilisation,
and when each was bound (the HTML report's timeline).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from troupe.api.config import ResolvedConfig
from troupe.sim.cluster import SimCluster
from troupe.sim.outcome import Outcome, key, outcome
from troupe.sim.snapshot_file import Snapshot
from troupe.whatif.load import add_nodes, add_objects, remove_nodes, to_schedule
from troupe.whatif.run import Idle, embedded, scheduler_on, settle


@dataclass(frozen=True, slots=True)
class Changes:
    """The what-if changes of one replay."""

    remove_selector: str | None = None  # a label selector of nodes to remove
    template: dict[str, Any] | None = None  # the Node cloned ``add_nodes`` times
    add_nodes: int = 0
    added: list[dict[str, Any]] = field(default_factory=list)  # more objects

    def apply(self, cluster: SimCluster) -> None:
        if self.remove_selector:
            remove_nodes(cluster, self.remove_selector)
        if self.template is not None and self.add_nodes:
            add_nodes(cluster, self.template, self.add_nodes)
        if self.added:
            add_objects(cluster, self.added)


@dataclass(slots=True)
class Run:
    profile: str
    outcome: Outcome
    nodes: int
    settled: bool  # idle before the timeout
    seconds: float


@contextmanager
def bind_times(cluster: SimCluster, keys: set[str], start: float) -> Iterator[dict[str, float]]:
    """Pod -> seconds from ``start`` at which it was bound, filled while in the block."""
    bound_at: dict[str, float] = {}

    def on_pod(_: str, pod: dict[str, Any]) -> None:
        name = key(pod)
        if name in keys and name not in bound_at and pod["spec"].get("nodeName"):
            bound_at[name] = time.monotonic() - start

    stop = cluster.store.listen("pods", on_pod)
    try:
        yield bound_at
    finally:
        stop()


async def replay(
    snapshot: Snapshot, config: ResolvedConfig, profile: str, changes: Changes, timeout: float
) -> Run:
    """Replay ``snapshot`` with ``changes`` under ``config`` (labelled ``profile``)."""
    names = {p.scheduler_name for p in config.profiles}
    async with embedded(snapshot) as cluster:
        changes.apply(cluster)
        keys = to_schedule(cluster, names)
        start = time.monotonic()
        with bind_times(cluster, set(keys), start) as bound_at:
            async with scheduler_on(cluster, config) as daemon:
                settled = await settle(Idle(cluster, daemon, set(keys)), timeout) is not None
                result = outcome(cluster, keys, bound_at)
        return Run(profile, result, len(cluster.node_names), settled, time.monotonic() - start)
