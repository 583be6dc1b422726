"""Consecutive pods of one signature share one evaluation (KEP-5598 opportunistic
batching for the pod cycle).

A Deployment or Job scaling up queues many pods with one spec. When the pod just
scheduled had the same signature as this one and nothing in the cluster changed
since it was assumed (the NodeTable's ``generation`` is the one its assumption
left), this pod would see exactly the cluster the last one saw plus that one pod.
``PodBatches`` then evaluates the signature once over every feasible node with a
``BatchPlacer`` and places each following pod by re-checking only the node the
previous pod took. Any other change to the cluster (a pod or node event, a
namespace's labels, a forgotten assumption, another signature) ends the batch, and the next pod goes
through the full cycle again.

Two rules keep the shared evaluation from costing more than it saves: a batch
starts only at the second consecutive pod of a signature with a quiet cluster in
between, and a signature that cannot be batched (a plugin that is not node-local
for it, a PreFilter node restriction, fewer than two feasible nodes) is not tried
again for ``RETRY_UNBATCHABLE_SECONDS``.
"""

from __future__ import annotations

from troupe.api.clock import Clock
from troupe.api.cycle import CycleState
from troupe.api.podinfo import PodInfo
from troupe.scheduler.cycle.algorithm import PodAlgorithm
from troupe.scheduler.cycle.batch_placer import BatchPlacer, Signature, signature
from troupe.scheduler.cycle.results import ScheduleResult
from troupe.scheduler.framework.runtime import Framework

RETRY_UNBATCHABLE_SECONDS = 5.0
_MAX_REMEMBERED = 256


class PodBatches:
    def __init__(self, algorithm: PodAlgorithm, clock: Clock) -> None:
        self.algorithm = algorithm
        self.cache = algorithm.cache
        self.clock = clock
        self._placer: BatchPlacer | None = None
        # (framework name, signature) of the pod last placed, and the table
        # generation its assumption left.
        self._last: tuple[str, Signature] | None = None
        self._generation = -1
        self._unbatchable: dict[tuple[str, Signature], float] = {}
        self.batched = 0
        self.batches = 0

    def _key(self, fwk: Framework, info: PodInfo) -> tuple[str, Signature]:
        with_labels = bool(self.cache.table.affinity_pods)
        return fwk.name, (with_labels, *signature(info, with_labels))

    def place(self, fwk: Framework, info: PodInfo) -> tuple[ScheduleResult, CycleState] | None:
        """This pod's node (already assumed) and cycle state when it can be placed
        from a shared evaluation; None to run the full cycle."""
        table = self.cache.table
        key = self._key(fwk, info)
        quiet = key == self._last and table.generation == self._generation
        if not quiet:
            self._placer = None
            return None
        placer = self._placer
        if placer is None:
            placer = self._start(fwk, info, key)
            if placer is None:
                return None
        got = placer.place(info)
        if got is None:
            self._placer = None
            return None
        self._generation = table.generation
        self.batched += 1
        return got

    def _start(
        self, fwk: Framework, info: PodInfo, key: tuple[str, Signature]
    ) -> BatchPlacer | None:
        now = self.clock.now()
        retry_at = self._unbatchable.get(key)
        if retry_at is not None and now < retry_at:
            return None
        placer = BatchPlacer(self.algorithm, fwk)
        if not placer.start(info, sample=False):
            if len(self._unbatchable) >= _MAX_REMEMBERED:
                self._unbatchable.clear()
            self._unbatchable[key] = now + RETRY_UNBATCHABLE_SECONDS
            return None
        self._unbatchable.pop(key, None)
        self._placer = placer
        self.batches += 1
        return placer

    def interrupt(self) -> None:
        """Something a batch's evaluation depends on changed outside the NodeTable
        (a namespace's labels): the next pod runs the full cycle."""
        self._placer = None
        self._last = None

    def assumed(self, fwk: Framework, info: PodInfo) -> None:
        """The full cycle just assumed ``info``: a next pod of the same signature
        may start a batch if nothing else changes meanwhile."""
        self._last = self._key(fwk, info)
        self._generation = self.cache.table.generation
        self._placer = None
