"""Running troupe on a snapshot: an embedded cluster loaded with it, a scheduler
daemon against it, and the one loop that waits until the run has settled.

``embedded`` starts a ``SimCluster`` with no nodes of its own and loads the snapshot
into it (``troupe.whatif.load``); ``scheduler_on`` runs a ``SchedulerDaemon`` — the
same code and profile as ``troupe run``, over HTTP — against it, with leader election
off (one scheduler, offline) and a fixed seed. ``settle`` polls a step function until
it returns a value or time runs out; ``troupe replay`` steps with ``Idle`` (the
scheduler idle and the state unchanged for ``SETTLE_SECONDS``), ``troupe explain``
with the end of the target's first attempt (``troupe.whatif.attempt``). Nothing here
talks to a real cluster.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

from troupe.api.config import ResolvedConfig
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.outcome import key
from troupe.sim.snapshot_file import Snapshot
from troupe.whatif.load import load_snapshot

T = TypeVar("T")
POLL_SECONDS: Final = 0.02
SETTLE_SECONDS: Final = 0.5  # idle and unchanged this long: settled
SYNC_SECONDS: Final = 30.0  # the daemon's informers must have listed by then
STOP_GRACE_SECONDS: Final = 1.0
# Watch bookmarks of the embedded cluster, so informers see its resourceVersion move.
BOOKMARK_SECONDS: Final = 0.5


@asynccontextmanager
async def embedded(snapshot: Snapshot) -> AsyncIterator[SimCluster]:
    """A fresh embedded cluster holding ``snapshot``'s objects."""
    async with SimCluster(heartbeat=None, bookmark_interval=BOOKMARK_SECONDS) as cluster:
        load_snapshot(cluster, snapshot)
        yield cluster


def offline(config: ResolvedConfig) -> ResolvedConfig:
    """``config`` with leader election off: one scheduler, nobody to elect against."""
    election = config.leader_election.model_copy(update={"leader_elect": False})
    return dataclasses.replace(config, leader_election=election)


@asynccontextmanager
async def scheduler_on(
    cluster: SimCluster, config: ResolvedConfig
) -> AsyncIterator[SchedulerDaemon]:
    """A troupe daemon with ``config`` scheduling ``cluster``, stopped on exit."""
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = cluster.write_kubeconfig(Path(tmp) / "kubeconfig")
        daemon = SchedulerDaemon(
            offline(config),
            Connection(kubeconfig=str(kubeconfig)),
            seed=1,
            sync_timeout=SYNC_SECONDS,
        )
        try:
            await daemon.start()
            yield daemon
        finally:
            await daemon.stop(grace=STOP_GRACE_SECONDS)


async def settle(step: Callable[[float], T | None], timeout: float) -> T | None:
    """Call ``step(now)`` (``now``: the loop's clock) every ``POLL_SECONDS`` until it
    returns a value, and return that; None once ``timeout`` seconds have passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        now = loop.time()
        found = step(now)
        if found is not None:
            return found
        if now > deadline:
            return None
        await asyncio.sleep(POLL_SECONDS)


def fingerprint(
    cluster: SimCluster, daemon: SchedulerDaemon, keys: set[str]
) -> tuple[Any, ...] | None:
    """The state of the pods to schedule when the scheduler is idle (nothing queued,
    in flight or binding; every pod either bound and cached or told why it is
    pending), else None."""
    s = daemon.scheduler
    if s is None:
        return None
    counts = s.queue.pending_counts()
    if counts["active"] or counts["backoff"] or s.queue.in_flight() or len(s.bindings):
        return None
    if s.cache.assumed_count:
        return None
    state = []
    for pod in cluster.store.list("pods", copy=False):
        name = key(pod)
        node = pod["spec"].get("nodeName") or ""
        if node and name not in s.cache:
            return None  # a binding the cache has not seen yet
        if name not in keys:
            continue
        told = any(
            c.get("type") == "PodScheduled" for c in pod.get("status", {}).get("conditions", [])
        )
        if not node and not told:
            return None
        state.append((name, node))
    return (tuple(sorted(state)), tuple(sorted(counts.items())))


class Idle:
    """A ``settle`` step: True once the scheduler has been idle, with the state of
    ``keys`` unchanged, for ``SETTLE_SECONDS``."""

    def __init__(self, cluster: SimCluster, daemon: SchedulerDaemon, keys: set[str]) -> None:
        self.cluster, self.daemon, self.keys = cluster, daemon, keys
        self.last: tuple[Any, ...] | None = None
        self.since: float | None = None

    def __call__(self, now: float) -> bool | None:
        seen = fingerprint(self.cluster, self.daemon, self.keys)
        if self.since is None or seen is None or seen != self.last:
            self.last, self.since = seen, now
            return None
        return True if now - self.since >= SETTLE_SECONDS else None
