"""Attempt statistics kept in process: counts per result and attempt latencies.

The scheduler reports every attempt here; the benchmark and ``troupe sim`` read
the figures. (Prometheus metrics observe the same calls.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

import numpy as np

from troupe.queue.entity import QueuedEntity

AttemptHook = Callable[[str, str, float], None]
GroupAttemptHook = Callable[[str, str, float, str], None]
"""(result, profile, seconds, entity type: ``podgroup`` | ``compositepodgroup``)."""
"""(result, profile, seconds) of one attempt."""
BoundHook = Callable[[int, float], None]
"""(attempts, seconds since the pod first entered the active queue) of a bound pod."""


class AttemptStats:
    def __init__(self, keep_latencies: bool = True) -> None:
        self.results: Counter[str] = Counter()
        # Scheduled attempts from pop to hand-off to the binding cycle (the decision).
        self.cycle_seconds: list[float] = []
        # Every attempt, binding included (upstream scheduling_attempt_duration).
        self.attempt_seconds: list[float] = []
        # Time from first entering the queue to being bound, per pod.
        self.e2e_seconds: list[float] = []
        self._keep = keep_latencies
        self.hooks: list[AttemptHook] = []
        # Pod-group cycles (scheduler_podgroup_scheduling_attempt_duration_seconds).
        self.group_results: Counter[str] = Counter()
        self.group_attempt_seconds: list[float] = []
        self.group_hooks: list[GroupAttemptHook] = []
        # Bound pods (scheduler_pod_scheduling_sli_duration_seconds, _attempts).
        self.bound_hooks: list[BoundHook] = []
        # Gang members of the running group cycles: (attempts, first active-queue
        # entry) of their group, for the SLI once they are bound.
        self._members: dict[str, tuple[int, float | None]] = {}

    def attempt(self, result: str, profile: str, seconds: float) -> None:
        self.results[result] += 1
        if self._keep and seconds:
            self.attempt_seconds.append(seconds)
        for hook in self.hooks:
            hook(result, profile, seconds)

    def group_attempt(
        self, result: str, profile: str, seconds: float, entity_type: str = "podgroup"
    ) -> None:
        """One pod-group cycle; ``entity_type`` is upstream's ``type`` label:
        ``podgroup``, or ``compositepodgroup`` for a CompositePodGroup (KEP-6012)."""
        self.group_results[result] += 1
        if self._keep:
            self.group_attempt_seconds.append(seconds)
        for hook in self.group_hooks:
            hook(result, profile, seconds, entity_type)

    def cycle(self, seconds: float) -> None:
        if self._keep:
            self.cycle_seconds.append(seconds)

    def scheduled(self, entity: QueuedEntity, now: float) -> None:
        if self._keep and entity.initial_attempt_timestamp is not None:
            self.e2e_seconds.append(max(0.0, now - entity.timestamp))
        self.bound(entity.attempts, entity.initial_attempt_timestamp, now)

    def bound(self, attempts: int, initial_attempt: float | None, now: float) -> None:
        """A pod was bound after ``attempts`` attempts; the SLI runs from its first
        entry into the active queue (upstream InitialAttemptTimestamp)."""
        if initial_attempt is None:
            return
        seconds = max(0.0, now - initial_attempt)
        for hook in self.bound_hooks:
            hook(attempts, seconds)

    def track_members(
        self, keys: Iterable[str], attempts: int, initial_attempt: float | None
    ) -> None:
        """A group cycle places these members: their SLI is their group's."""
        for key in keys:
            self._members[key] = (attempts, initial_attempt)

    def forget_member(self, key: str) -> None:
        """The member's placement was undone (or it was never placed)."""
        self._members.pop(key, None)

    def member_bound(self, key: str, now: float) -> None:
        """A pod was bound: a tracked gang member reports its group's SLI."""
        member = self._members.pop(key, None)
        if member is not None:
            self.bound(*member, now)

    def percentile_ms(self, q: float, which: str = "attempt") -> float:
        data = {
            "attempt": self.attempt_seconds,
            "cycle": self.cycle_seconds,
            "e2e": self.e2e_seconds,
            "group": self.group_attempt_seconds,
        }[which]
        if not data:
            return 0.0
        return float(np.percentile(np.asarray(data), q) * 1000.0)
