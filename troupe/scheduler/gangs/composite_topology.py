"""Per-level topology of a CompositePodGroup (KEP-6012 over KEP-5732).

Every node of a composite tree may hold its pods to one domain of its own label: the
composite (``spec.schedulingConstraints`` or troupe's annotations) and each leaf
PodGroup. "Each worker group in one rack, all of them in one zone" is a zone on the
composite and a rack on each leaf. ``CompositePlacer.place`` walks the tree top down:

- a node with a required level tries its domains inside its parent's, in value
  order, skipping those that cannot hold the pods the node needs at least
  (``required_pods``, from the capacity bound) and those that do not hold the node's
  bound pods; the first domain in which the node's own rule is met wins (the pods of
  the domains tried before are taken back);
- inside it, children are placed one after another, each by the same rule;
- a leaf's members are placed with the ordinary pod algorithm on the domain's nodes.

The composite's all-or-nothing rule is then applied by the pod-group cycle to what
was placed (``troupe.scheduler.gangs.composite_quorum``), exactly as without
topology. Preferred levels are a gang's (``troupe.scheduler.gangs.topology``); a tree
takes required levels only.
"""

from __future__ import annotations

from troupe.api.composite import GroupNode, kept_leaves, required_pods
from troupe.api.framework import Placement
from troupe.api.gangs import GroupKey, group_ref_of
from troupe.api.podinfo import PodInfo
from troupe.scheduler.gangs.attempt import Failure, GroupAttempt
from troupe.scheduler.gangs.attempt import Placement as Member
from troupe.scheduler.gangs.capacity import capacity_of
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.gangs.placement import GangPlacer


def has_topology(node: GroupNode) -> bool:
    """Whether any level of the tree asks for a domain."""
    return bool(node.topology.required) or any(has_topology(c) for c in node.children)


class CompositePlacer:
    def __init__(self, gang: GangPlacer, groups: GangDirectory) -> None:
        self.gang = gang
        self.cache = gang.cache
        self.groups = groups

    def place(self, attempt: GroupAttempt, tree: GroupNode) -> tuple[list[Member], list[Failure]]:
        """The composite's members placed level by level, each leaf's members counted
        on top of ``attempt.before``."""
        walk = _Walk(self, attempt)
        table = self.cache.table
        try:
            walk.node(tree, Placement("", table.present.copy()))
        except BaseException:
            self.gang.revert(attempt.fwk, walk.placed)
            raise
        return walk.placed, walk.failures


class _Walk:
    def __init__(self, placer: CompositePlacer, attempt: GroupAttempt) -> None:
        self.placer, self.attempt, self.fwk = placer, attempt, attempt.fwk
        self.table = placer.cache.table
        self.by_leaf: dict[GroupKey | None, list[PodInfo]] = {}
        for m in attempt.members:
            ref = group_ref_of(m.pod)
            self.by_leaf.setdefault(ref.key if ref is not None else None, []).append(m)
        self.counts: dict[GroupKey, int] = dict(attempt.before)
        self.placed: list[Member] = []
        self.failures: list[Failure] = []

    def node(self, node: GroupNode, domain: Placement) -> bool:
        """Place ``node``'s pods inside ``domain``; whether its own rule is met."""
        key = node.topology.required
        if not key:
            return self._inside(node, domain)
        generators = self.fwk.placement_generate
        if not generators:
            return self._inside(node, domain)
        subs, status = generators[0][1].generate_placements(key, self.table, domain)
        pods = self._pods(node)
        if not status.is_success:
            self.failures.extend((m, status, None) for m in pods)
            return False
        pinned = self._pinned(node)
        subs = [s for s in subs if all(bool(s.nodes[slot]) for slot in pinned)]
        need = required_pods(node) - sum(self.counts.get(leaf.key, 0) for leaf in node.leaves())
        if pods and need > 0:
            algorithm, group = self.placer.gang.algorithm, self.attempt.group
            bounds = capacity_of(self.fwk, algorithm, pods, group).bounds(
                self.table, domain.nodes, subs
            )
            subs = [s for s, b in zip(subs, bounds, strict=True) if b >= need]
        last_failures: list[Failure] = []
        for sub in subs:
            mark, counts, failed = len(self.placed), dict(self.counts), len(self.failures)
            if self._inside(node, sub):
                return True
            last_failures = self.failures[failed:]
            self.placer.gang.revert(self.fwk, self.placed[mark:])
            del self.placed[mark:]
            del self.failures[failed:]
            self.counts = counts
        self.failures.extend(last_failures)
        return False

    def _inside(self, node: GroupNode, domain: Placement) -> bool:
        if not node.composite:
            members = self.by_leaf.get(node.key, [])
            if members:
                placed, failures = self.placer.gang.place_within(
                    self.attempt, members, domain.nodes
                )
                self.placed.extend(placed)
                self.failures.extend(failures)
                self.counts[node.key] = self.counts.get(node.key, 0) + len(placed)
            return self.counts.get(node.key, 0) >= max(node.min_count, 1)
        for child in node.children:
            self.node(child, domain)
        return kept_leaves(node, self.counts) is not None

    def _pods(self, node: GroupNode) -> list[PodInfo]:
        return [m for leaf in node.leaves() for m in self.by_leaf.get(leaf.key, [])]

    def _pinned(self, node: GroupNode) -> list[int]:
        slots = []
        for leaf in node.leaves():
            for key in self.placer.groups.placed_members(leaf.key):
                name = self.placer.cache.node_of(key)
                slot = self.table.slot(name) if name else None
                if slot is not None:
                    slots.append(slot)
        return slots
