"""The quorum of a CompositePodGroup attempt: which leaves' placements go ahead.

A gang CompositePodGroup (KEP-6012) is one queue entity holding the pending pods of
every PodGroup under it. The pod-group cycle (``troupe.scheduler.gangs.group_cycle``)
places them all, then ``split`` counts, per leaf, the members bound or assumed before
the attempt plus those placed now and asks ``troupe.api.composite.kept_leaves``:
either the composite is satisfied (at least ``minGroupCount`` children, each at its
own quorum, recursively) and the placements of leaves below their own quorum are
handed back, or nothing of the attempt goes ahead. ``GangAdmission`` asks
``holds`` again when a binding fails, ``GangRecovery`` asks ``complete`` of a
composite whose members are bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from troupe.api.composite import GroupNode, describe, kept_leaves, satisfied_children
from troupe.api.gangs import GroupKey, group_ref_of
from troupe.scheduler.gangs.attempt import Placement


@dataclass(frozen=True, slots=True)
class CompositeSplit:
    """An attempt's placements by the composite's rule."""

    # The placements that go ahead; None when the composite is not satisfied.
    kept: list[Placement] | None
    # Placements of leaves below their own quorum: released, their pods wait.
    held_back: list[Placement]
    # Where the attempt got: ``2 of 2 required groups fit (driver 1/1, workers 7/6)``.
    state: str


def leaf_key(p: Placement) -> GroupKey | None:
    ref = group_ref_of(p.info.pod)
    return ref.key if ref is not None else None


def split(
    tree: GroupNode, before: Mapping[GroupKey, int], placed: list[Placement]
) -> CompositeSplit:
    """``placed`` by the rule of ``tree``, each leaf having ``before`` members bound or
    assumed before the attempt."""
    counts = dict(before)
    for p in placed:
        key = leaf_key(p)
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    state = (
        f"{satisfied_children(tree, counts)} of {tree.min_count} required groups fit "
        f"({describe(tree, counts)})"
    )
    kept = kept_leaves(tree, counts)
    if kept is None:
        return CompositeSplit(None, list(placed), state)
    go = [p for p in placed if leaf_key(p) in kept]
    back = [p for p in placed if leaf_key(p) not in kept]
    return CompositeSplit(go, back, state)


def holds(tree: GroupNode, placed: Mapping[GroupKey, int]) -> bool:
    """Whether the composite is still satisfied with ``placed`` members per leaf."""
    return kept_leaves(tree, placed) is not None


def complete(tree: GroupNode, placed: Mapping[GroupKey, int]) -> bool:
    """No PodGroup of ``tree`` is bound below its own quorum and the composite holds:
    what a composite whose members are all bound must be (the partial-gang check of
    ``troupe.scheduler.gangs.recovery``)."""
    short = any(0 < placed.get(leaf.key, 0) < max(leaf.min_count, 1) for leaf in tree.leaves())
    return not short and holds(tree, placed)
