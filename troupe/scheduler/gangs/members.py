"""``MemberTally``: every existing pod naming a group, and what the member rules read.

Kept by ``GangDirectory`` from the pod informer (``seen`` for an added or updated pod,
``drop`` for a deleted one, or one that now names another group or none). Per group:
the members in any phase (scheduler-plugins counts them against ``minMember``), the
scheduler each names, the priority of each member of a standalone PodGroup (KEP-4671
1.37: members share the group's priority), and the members that ran to completion.

Upstream's pod-group cycle (``validatePodGroup``) fails a group whose members name
different schedulers, or whose members' priority differs from the group's, with
``SchedulerError``; ``schedulers_problem`` and ``priority_problem`` word those
problems as upstream does, naming the offending pods. ``seen`` and ``drop`` return
the groups whose rule inputs moved, for the directory to drop its cached problem
and (``notify``) to tell the queue.
"""

from __future__ import annotations

from typing import Final, NamedTuple, TypeVar

from troupe.api.gangs import GangApi, GroupKey, GroupProblem, GroupRef
from troupe.api.objects import Pod, PodKey

# How many pod names a members problem lists per scheduler name or priority.
NAMES_SHOWN: Final = 3

_K = TypeVar("_K")


class RulesMoved(NamedTuple):
    """The member rules' inputs of ``ref`` moved: drop its cached problem; with
    ``notify``, the problem may have come or gone, so the queue must hear of it."""

    ref: GroupRef
    notify: bool


class MemberTally:
    def __init__(self) -> None:
        self._group_of: dict[PodKey, GroupRef] = {}
        self._schedulers_of: dict[GroupKey, dict[PodKey, str]] = {}
        # Per group, how many members name each scheduler.
        self._schedulers: dict[GroupKey, dict[str, int]] = {}
        self._priority_of: dict[GroupKey, dict[PodKey, int]] = {}
        self._priorities: dict[GroupKey, dict[int, int]] = {}
        self._finished: dict[GroupKey, set[PodKey]] = {}

    # --- reading ---------------------------------------------------------------------------

    def group_of(self, pod_key: PodKey) -> GroupRef | None:
        return self._group_of.get(pod_key)

    def has_members(self, key: GroupKey) -> bool:
        return key in self._schedulers_of

    def member_keys(self, key: GroupKey) -> set[PodKey]:
        """Keys of every existing pod naming the group (a copy)."""
        return set(self._schedulers_of.get(key, ()))

    def entries(self) -> int:
        """How many per-group and per-pod entries are kept (everything is dropped
        with the last member, so this follows the live pods)."""
        tables = (
            self._group_of,
            self._schedulers_of,
            self._schedulers,
            self._priority_of,
            self._priorities,
            self._finished,
        )
        return sum(len(table) for table in tables)

    def finished(self, key: GroupKey) -> int:
        """How many existing members ran to completion (Succeeded or Failed)."""
        return len(self._finished.get(key, ()))

    # --- the pod informer ------------------------------------------------------------------

    def seen(self, ref: GroupRef, pod: Pod) -> list[RulesMoved]:
        """``pod`` exists and names ``ref`` (the caller dropped it from any other group)."""
        key = pod.key
        self._group_of[key] = ref
        if pod.is_terminal:
            self._finished.setdefault(ref.key, set()).add(key)
        else:
            _discard(self._finished, ref.key, key)
        moved = self._priority_seen(ref, key, pod.spec.priority or 0)
        members = self._schedulers_of.setdefault(ref.key, {})
        scheduler = pod.spec.scheduler_name
        before = members.get(key)
        if before == scheduler:
            return moved
        members[key] = scheduler
        counts = self._schedulers.setdefault(ref.key, {})
        distinct = len(counts)
        if before is not None:
            _decrement(counts, before)
        counts[scheduler] = counts.get(scheduler, 0) + 1
        return [*moved, self._schedulers_moved(ref, distinct)]

    def drop(self, pod_key: PodKey) -> tuple[GroupRef | None, list[RulesMoved]]:
        """``pod_key`` no longer names a group: the group it named (None when that
        group kept no scheduler for it), and what moved."""
        ref = self._group_of.pop(pod_key, None)
        if ref is None:
            return None, []
        _discard(self._finished, ref.key, pod_key)
        moved = self._priority_gone(ref, pod_key)
        members = self._schedulers_of.get(ref.key)
        if members is None or (scheduler := members.pop(pod_key, None)) is None:
            return None, moved
        counts = self._schedulers[ref.key]
        distinct = len(counts)
        _decrement(counts, scheduler)
        if not members:
            del self._schedulers_of[ref.key]
            del self._schedulers[ref.key]
        return ref, [*moved, self._schedulers_moved(ref, distinct)]

    def _schedulers_moved(self, ref: GroupRef, distinct_before: int) -> RulesMoved:
        """While the members name (or named) more than one scheduler, the queue must
        hear of it, so it gates or releases the group at once."""
        return RulesMoved(ref, distinct_before > 1 or len(self._schedulers.get(ref.key, ())) > 1)

    def _priority_seen(self, ref: GroupRef, pod_key: PodKey, priority: int) -> list[RulesMoved]:
        if ref.api is not GangApi.POD_GROUP:
            return []
        priorities = self._priority_of.setdefault(ref.key, {})
        before = priorities.get(pod_key)
        if before == priority:
            return []
        priorities[pod_key] = priority
        counts = self._priorities.setdefault(ref.key, {})
        values = set(counts)
        if before is not None:
            _decrement(counts, before)
        counts[priority] = counts.get(priority, 0) + 1
        return self._priorities_moved(ref, values)

    def _priority_gone(self, ref: GroupRef, pod_key: PodKey) -> list[RulesMoved]:
        priorities = self._priority_of.get(ref.key)
        if priorities is None or (priority := priorities.pop(pod_key, None)) is None:
            return []
        counts = self._priorities[ref.key]
        values = set(counts)
        _decrement(counts, priority)
        if not priorities:
            del self._priority_of[ref.key]
            del self._priorities[ref.key]
        return self._priorities_moved(ref, values)

    def _priorities_moved(self, ref: GroupRef, values_before: set[int]) -> list[RulesMoved]:
        """A priority value appeared among the members or left them."""
        if set(self._priorities.get(ref.key, ())) != values_before:
            return [RulesMoved(ref, True)]
        return []

    # --- the rules -------------------------------------------------------------------------

    def schedulers_problem(self, ref: GroupRef) -> GroupProblem | None:
        counts = self._schedulers.get(ref.key)
        if counts is None or len(counts) < 2:
            return None
        by_scheduler: dict[str, list[str]] = {}
        for pod_key, scheduler in self._schedulers_of[ref.key].items():
            by_scheduler.setdefault(scheduler, []).append(pod_key.partition("/")[2])
        return GroupProblem(
            ref,
            "spec.schedulerName",
            "all pods in a single pod group should have the same .spec.schedulerName set, "
            "got "
            + ", ".join(describe(f'"{s}"', names) for s, names in sorted(by_scheduler.items())),
            outcome="SchedulerError",
        )

    def priority_problem(
        self, ref: GroupRef, group_priority: int | None, api_version: str
    ) -> GroupProblem | None:
        """Upstream compares each member with the group's priority, which admission
        always fills in; where the group has none (no class, no admission), troupe
        compares the members with each other."""
        counts = self._priorities.get(ref.key)
        if not counts:
            return None
        if len(counts) < 2 and (group_priority is None or group_priority in counts):
            return None
        by_priority: dict[int, list[str]] = {}
        for pod_key, priority in self._priority_of[ref.key].items():
            by_priority.setdefault(priority, []).append(pod_key.partition("/")[2])
        message = (
            "all pods in a single pod group should have the same priority as the pod "
            "group's priority, got "
            + ", ".join(describe(str(p), names) for p, names in sorted(by_priority.items()))
        )
        if group_priority is not None:
            message += f"; the pod group's priority is {group_priority}"
        return GroupProblem(
            ref, "spec.priority", message, api_version=api_version, outcome="SchedulerError"
        )


def _discard(sets: dict[GroupKey, set[PodKey]], key: GroupKey, pod_key: PodKey) -> None:
    found = sets.get(key)
    if found is not None:
        found.discard(pod_key)
        if not found:
            del sets[key]


def _decrement(counts: dict[_K, int], name: _K) -> None:
    left = counts[name] - 1
    if left:
        counts[name] = left
    else:
        del counts[name]


def describe(value: str, pod_names: list[str]) -> str:
    shown = sorted(pod_names)[:NAMES_SHOWN]
    more = len(pod_names) - len(shown)
    listed = ", ".join(shown) + (f" and {more} more" if more else "")
    return f"{value} ({listed})"
