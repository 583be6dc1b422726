"""A CompositePodGroup's tree and its all-or-nothing rule (KEP-6012, Kubernetes 1.37).

A composite is a gang of groups: its children are v1beta1 PodGroups (leaves) and
other composites, at most ``MAX_TREE_DEPTH`` levels deep. A ``gang`` composite is
satisfied when at least ``minGroupCount`` children are, a ``basic`` one when any child
is; a leaf when its placed members (bound, assumed, or placed in this attempt) reach
its own ``minCount`` (one for a ``basic`` leaf).

``troupe.scheduler.gangs.directory`` builds a ``GroupNode`` tree for the topmost gang
composite above a leaf (the queue entity its pods join); the pod-group cycle
(``troupe.scheduler.gangs.group_cycle``) asks ``kept_leaves`` which leaves' placements
go ahead, and ``admission`` the same after a binding failed. Pure functions over
counts: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from troupe.api.group_key import GroupKey
from troupe.api.topology import TopologyLevels


@dataclass(frozen=True, slots=True)
class GroupNode:
    """One node of a composite tree: a leaf PodGroup, or a child composite."""

    key: GroupKey
    name: str
    gang: bool
    # A leaf's minCount (1 for basic); a gang composite's minGroupCount.
    min_count: int
    children: tuple[GroupNode, ...] = ()
    composite: bool = False
    # Where this node's pods must (and would rather) be, each level on its own
    # (KEP-6012 per-level topology: each child group in one rack, all in one zone).
    topology: TopologyLevels = field(default_factory=TopologyLevels)

    def leaves(self) -> Iterator[GroupNode]:
        """Every leaf PodGroup under this node (itself, for a leaf)."""
        if not self.composite:
            yield self
            return
        for child in self.children:
            yield from child.leaves()


def kept_leaves(node: GroupNode, placed: Mapping[GroupKey, int]) -> frozenset[GroupKey] | None:
    """The leaves whose placements go ahead when each leaf has ``placed`` members,
    or None when ``node`` is not satisfied (nothing under it goes ahead). A satisfied
    composite keeps only its satisfied children: a leaf below its own quorum binds
    nothing, even when its siblings carry the composite."""
    if not node.composite:
        count = placed.get(node.key, 0)
        return frozenset((node.key,)) if count >= max(node.min_count, 1) else None
    kept: list[frozenset[GroupKey]] = []
    for child in node.children:
        found = kept_leaves(child, placed)
        if found is not None:
            kept.append(found)
    needed = node.min_count if node.gang else 1
    if len(kept) < max(needed, 1):
        return None
    return frozenset().union(*kept)


def required_pods(node: GroupNode) -> int:
    """The fewest members that can satisfy ``node``: its quorum in pods, for messages
    and for the checks that count a group's placed members against one number."""
    if not node.composite:
        return max(node.min_count, 1)
    needs = sorted(required_pods(child) for child in node.children)
    take = node.min_count if node.gang else 1
    return sum(needs[: max(take, 1)])


def describe(node: GroupNode, placed: Mapping[GroupKey, int]) -> str:
    """How far each child got, for messages: ``driver 1/1, workers 5/6``; a child
    composite in brackets with its own count."""
    parts: list[str] = []
    for child in node.children:
        if child.composite:
            inner = describe(child, placed)
            done = sum(1 for c in child.children if kept_leaves(c, placed) is not None)
            parts.append(f"{child.name} {done}/{child.min_count} groups [{inner}]")
        else:
            parts.append(f"{child.name} {placed.get(child.key, 0)}/{max(child.min_count, 1)}")
    return ", ".join(parts)


def satisfied_children(node: GroupNode, placed: Mapping[GroupKey, int]) -> int:
    """How many of ``node``'s children are satisfied."""
    return sum(1 for child in node.children if kept_leaves(child, placed) is not None)
