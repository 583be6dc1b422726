"""One scheduling attempt at a target, run offline: ``troupe explain --offline``'s
diagnosis, and the check every fix must pass before it is suggested.

``attempt`` loads the state an attempt depends on (``ClusterState.for_attempt``: every
bound pod and the target's pending pods) into an embedded cluster, runs the same
``SchedulerDaemon`` (the same profile, the same code) on it (``troupe.whatif.run``)
and waits until the target is bound or rejected once; the rejection is the
scheduler's own diagnosis (``troupe.whatif.diagnosis``). ``Trial.check`` runs it on a
modified copy of the state and turns a fix that binds the target into the fix as
shown (``verified``, ``checkSeconds``, ``placement``). Nothing is written to the real
cluster.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from troupe.api.config import ResolvedConfig
from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.whatif.diagnosis import Diagnosis, parse_diagnosis
from troupe.whatif.errors import WhatIfError
from troupe.whatif.run import embedded, scheduler_on, settle
from troupe.whatif.state import ClusterState, Target, pod_key

Fix = dict[str, Any]
ATTEMPT_SECONDS: Final = 20.0
# Once part of a gang is bound, how long the rest may take before the quorum's
# binding counts as the outcome (its other members then wait: not a rejection).
QUORUM_BOUND_SECONDS: Final = 2.0


@dataclass(frozen=True)
class Attempt:
    bound: bool
    # The scheduler's diagnosis of the target's rejection (None: bound).
    diagnosis: Diagnosis | None
    nodes: dict[str, str] = field(default_factory=dict)  # pod key -> node, when bound


async def attempt(
    config: ResolvedConfig,
    state: ClusterState,
    target: Target,
    timeout: float = ATTEMPT_SECONDS,
) -> Attempt:
    """How the target's first attempt ends in an embedded cluster holding ``state``."""
    members = {pod_key(p) for p in state.members(target)}
    if not members:
        raise WhatIfError(f"{target.kind} {target.display} has no pending pod")
    async with (
        embedded(state.for_attempt(target)) as cluster,
        scheduler_on(cluster, config) as daemon,
    ):
        ended = await settle(_AttemptEnd(cluster, daemon, target, members), timeout)
    if ended is None:
        raise WhatIfError(f"the scheduler made no attempt at {target.display} in {timeout:g}s")
    return ended


class _AttemptEnd:
    """A ``settle`` step: the attempt once the scheduler recorded a rejection of the
    target, or bound every member (or some, and no more for QUORUM_BOUND_SECONDS)."""

    def __init__(
        self, cluster: SimCluster, daemon: SchedulerDaemon, target: Target, members: set[str]
    ) -> None:
        self.cluster, self.daemon, self.target, self.members = cluster, daemon, target, members
        self.first_bound: float | None = None

    def __call__(self, now: float) -> Attempt | None:
        t = self.target
        record = self.daemon.explain(t.kind, t.namespace, t.name, t.sub)
        if record is not None:
            return Attempt(False, parse_diagnosis(record))
        nodes = self._bound()
        if len(nodes) == len(self.members):
            return Attempt(True, None, nodes)
        if nodes and self.first_bound is None:
            self.first_bound = now
        if self.first_bound is not None and now > self.first_bound + QUORUM_BOUND_SECONDS:
            return Attempt(True, None, nodes)
        return None

    def _bound(self) -> dict[str, str]:
        store = self.cluster.store
        nodes = {}
        for key in self.members:
            ns, name = key.split("/", 1)
            pod = store.find(store.resolve("pods"), ns, name)
            node = (pod or {}).get("spec", {}).get("nodeName")
            if node:
                nodes[key] = node
        return nodes


@dataclass(frozen=True)
class Trial:
    """What every fix is checked against: the profile and the target."""

    config: ResolvedConfig
    target: Target

    async def check(self, state: ClusterState, fix: Fix) -> Fix | None:
        """``fix`` as shown, once the scheduler run on ``state`` (a modified copy) binds
        the target: with ``verified``, ``checkSeconds`` and the ``placement``. None when
        it does not bind there (the fix is then not suggested)."""
        start = time.perf_counter()
        outcome = await attempt(self.config, state, self.target)
        if not outcome.bound:
            return None
        return {
            **fix,
            "verified": True,
            "checkSeconds": round(time.perf_counter() - start, 2),
            "placement": outcome.nodes,
        }

    async def first_that_binds(self, candidates: Iterable[tuple[ClusterState, Fix]]) -> list[Fix]:
        """The first of ``candidates`` (state, fix) that binds the target, checked in
        order: ``[fix]``, or ``[]`` when none does."""
        for state, fix in candidates:
            found = await self.check(state, fix)
            if found is not None:
                return [found]
        return []
