"""Preemption candidates: nodes where evicting some pods lets the preemptor fit.

``dry_run`` is upstream's ``DryRunPreemption``: starting at a random offset, it
selects victims on the potential nodes in turn until it has ``want`` candidates
(at least one of them breaking no PodDisruptionBudget), and remembers why every
other node it looked at cannot help. ``pick_one_node`` is
``pickOneNodeForPreemption``: the candidate with the fewest PDB violations, then
the lowest highest-victim priority, the smallest sum of victim priorities, the
fewest victims, the latest start among its highest-priority victims, and finally
the first one found.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from troupe.api.framework import Handle
from troupe.api.pdb import PodDisruptionBudget
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status
from troupe.plugins.defaultpreemption.units import start_time
from troupe.plugins.defaultpreemption.victims import NodeVictims, select_victims_on_node

# Upstream adds MaxInt32 + 1 to every priority so that a sum over negative
# priorities still favours fewer victims.
_PRIORITY_OFFSET = 2**31


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    victims: tuple[PodInfo, ...]  # most important first
    pdb_violations: int


@dataclass(slots=True)
class DryRun:
    candidates: list[Candidate]
    # Why each examined node that is not a candidate cannot help.
    statuses: dict[str, Status]


def dry_run(
    handle: Handle,
    pod: PodInfo,
    potential: Sequence[int],
    pdbs: Sequence[PodDisruptionBudget],
    offset: int,
    want: int,
) -> DryRun:
    """Candidates among the slots ``potential``, examined from ``offset`` on;
    candidates breaking no budget come first."""
    clean: list[Candidate] = []
    violating: list[Candidate] = []
    statuses: dict[str, Status] = {}
    names = handle.table.names
    n = len(potential)
    for i in range(n):
        slot = potential[(offset + i) % n]
        found = select_victims_on_node(handle, pod, slot, pdbs)
        if isinstance(found, Status):
            statuses[names[slot]] = found
            continue
        if not found.victims:
            # Nothing to evict yet the pod did not fit before: a filter outside our
            # view changed its mind; this node is no candidate (upstream errors here).
            statuses[names[slot]] = Status.from_error(
                RuntimeError(f'expected at least one victim pod on node "{names[slot]}"')
            )
            continue
        bucket = violating if found.pdb_violations else clean
        if len(bucket) < want:
            bucket.append(_candidate(names[slot], found))
        if clean and len(clean) + len(violating) >= want:
            break
    return DryRun(clean + violating, statuses)


def _candidate(node: str, found: NodeVictims) -> Candidate:
    return Candidate(node, found.victims, found.pdb_violations)


def _earliest_top_start(c: Candidate) -> float:
    """The earliest start time among the victims of the highest priority."""
    top = c.victims[0].priority
    return min(start_time(v.pod) for v in c.victims if v.priority == top)


_CRITERIA: tuple[Callable[[Candidate], float], ...] = (
    # Fewest PodDisruptionBudget violations.
    lambda c: -c.pdb_violations,
    # Lowest priority among the most important victims.
    lambda c: -c.victims[0].priority,
    # Smallest sum of victim priorities.
    lambda c: -sum(v.priority + _PRIORITY_OFFSET for v in c.victims),
    # Fewest victims.
    lambda c: -len(c.victims),
    # Latest start time of the most important victims (they lose the least work).
    _earliest_top_start,
)


def pick_one_node(candidates: Sequence[Candidate]) -> Candidate:
    """The best of (at least one) candidates by upstream's ordering; ties keep the
    earliest found."""
    if not candidates:
        raise ValueError("pick_one_node needs at least one candidate")
    remaining = list(candidates)
    for score in _CRITERIA:
        if len(remaining) <= 1:
            break
        best = max(score(c) for c in remaining)
        remaining = [c for c in remaining if score(c) == best]
    return remaining[0]
