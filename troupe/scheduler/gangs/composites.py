"""CompositePodGroup layouts (KEP-6012): a leaf's chain of parents, a composite's tree.

``GangDirectory`` (``troupe.scheduler.gangs.directory``) keeps the v1alpha3
CompositePodGroups by ``namespace/name`` and calls these when it works out a leaf
PodGroup's verdict and route (``chain_of``, ``entity_ref``) or a composite's policy
(``tree_of``). Upstream's API server validates each object alone; the layout rules that
span objects are the scheduler's, reported with upstream's ``Invalid`` reason (the
``CompositePodGroupInitiallyScheduled`` reasons of v1alpha3/types.go): a cycle, a tree
deeper than ``MAX_TREE_DEPTH`` levels, groups of different Workloads. A parent that does
not exist yet is no error: the leaf waits for it. Pure functions over the objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from troupe.api.composite import GroupNode
from troupe.api.gangapi import (
    MAX_TREE_DEPTH,
    REASON_INVALID,
    CompositePodGroup,
    V1beta1PodGroup,
)
from troupe.api.gangs import GangApi, GangPolicy, GroupProblem, GroupRef
from troupe.api.topology import TopologyLevels, levels_from

LeafPolicy = Callable[[V1beta1PodGroup], GangPolicy | GroupProblem | None]
"""A leaf PodGroup's own verdict (its minCount, or why it cannot be scheduled)."""

_PARENT_FIELD = "spec.parentCompositePodGroupName"


def parent_of(obj: object) -> str:
    """The CompositePodGroup a v1beta1 PodGroup names as its parent ("" for none)."""
    if isinstance(obj, V1beta1PodGroup):
        return obj.spec.parent_composite_pod_group_name or ""
    return ""


def chain_of(
    leaf: V1beta1PodGroup, composites: Mapping[str, CompositePodGroup]
) -> list[CompositePodGroup] | GroupProblem:
    """The composites above ``leaf``, parent first, or why its layout is wrong (a
    cycle, deeper than ``MAX_TREE_DEPTH``, groups of different Workloads) or
    incomplete (a parent that does not exist yet: ``waiting``)."""
    namespace, name = leaf.metadata.namespace, leaf.metadata.name
    ref = GroupRef(GangApi.POD_GROUP, namespace, name)

    def problem(message: str, *, waiting: bool = False) -> GroupProblem:
        outcome = "Unschedulable" if waiting else REASON_INVALID
        return GroupProblem(
            ref,
            _PARENT_FIELD,
            message,
            api_version=leaf.api_version,
            outcome=outcome,
            waiting=waiting,
        )

    chain: list[CompositePodGroup] = []
    seen: list[str] = []
    workloads: dict[str, str] = {}
    if leaf.spec.workload_ref is not None and leaf.spec.workload_ref.workload_name:
        workloads[name] = leaf.spec.workload_ref.workload_name
    parent = parent_of(leaf)
    while parent:
        if parent in seen:
            path = " -> ".join([name, *seen, parent])
            return problem(f"the CompositePodGroup tree has a cycle: {path}")
        cpg = composites.get(f"{namespace}/{parent}")
        if cpg is None:
            child = seen[-1] if seen else name
            return problem(
                f"waiting for CompositePodGroup {namespace}/{parent} to appear "
                f"(named by {namespace}/{child})",
                waiting=True,
            )
        seen.append(parent)
        chain.append(cpg)
        # The leaf is a level of its own.
        if len(chain) + 1 > MAX_TREE_DEPTH:
            path = " -> ".join([name, *seen])
            return problem(
                f"the CompositePodGroup tree is deeper than {MAX_TREE_DEPTH} levels: {path}"
            )
        if cpg.spec.workload_ref is not None and cpg.spec.workload_ref.workload_name:
            workloads[parent] = cpg.spec.workload_ref.workload_name
        parent = cpg.spec.parent_composite_pod_group_name or ""
    if len(set(workloads.values())) > 1:
        named = ", ".join(f"{n} ({w})" for n, w in workloads.items())
        return problem(
            f"the groups of one CompositePodGroup tree belong to different Workloads: {named}"
        )
    return chain


def entity_ref(ref: GroupRef, chain: Sequence[CompositePodGroup]) -> GroupRef:
    """The group whose queue entity the pods of leaf ``ref`` join: the topmost gang
    composite of its ``chain`` (its pods are placed in one cycle with the rest of that
    composite's tree), else the leaf itself (only basic composites above it: its
    children are placed independently)."""
    top = ref
    for cpg in chain:
        if cpg.spec.scheduling_policy.gang is not None:
            top = GroupRef(GangApi.POD_GROUP, ref.namespace, cpg.metadata.name, composite=True)
    return top


def composite_topology(cpg: CompositePodGroup) -> TopologyLevels:
    """A composite's own levels (``schedulingConstraints``, troupe's annotations). A
    bad value is not enforced: the composite is placed without it (docs/topology.md)."""
    constraints = cpg.spec.scheduling_constraints
    keys = tuple(t.key for t in constraints.topology) if constraints else ()
    levels, field, _ = levels_from(cpg.metadata.annotations, keys)
    return TopologyLevels() if field else levels


def tree_of(
    cpg: CompositePodGroup,
    composites: Mapping[str, CompositePodGroup],
    leaves: Iterable[V1beta1PodGroup],
    leaf_policy: LeafPolicy,
) -> GroupNode:
    """``cpg``'s tree: the composites and leaf PodGroups naming it, at any depth (cut
    at ``MAX_TREE_DEPTH``: deeper leaves are held as ``Invalid`` by ``chain_of``), each
    node with its quorum."""
    namespace = cpg.metadata.namespace
    children_of: dict[str, list[CompositePodGroup | V1beta1PodGroup]] = {}
    for other in composites.values():
        parent = other.spec.parent_composite_pod_group_name
        if other.metadata.namespace == namespace and parent:
            children_of.setdefault(parent, []).append(other)
    for leaf in leaves:
        parent = parent_of(leaf)
        if leaf.metadata.namespace == namespace and parent:
            children_of.setdefault(parent, []).append(leaf)

    def node(obj: CompositePodGroup, depth: int) -> GroupNode:
        name = obj.metadata.name
        children: list[GroupNode] = []
        if depth < MAX_TREE_DEPTH:
            for child in sorted(children_of.get(name, ()), key=lambda c: c.metadata.name):
                if isinstance(child, CompositePodGroup):
                    children.append(node(child, depth + 1))
                    continue
                ref = GroupRef(GangApi.POD_GROUP, namespace, child.metadata.name)
                verdict = leaf_policy(child)
                gang = isinstance(verdict, GangPolicy) and verdict.gang
                min_count = verdict.min_count if isinstance(verdict, GangPolicy) else 1
                topology = verdict.topology if isinstance(verdict, GangPolicy) else None
                children.append(
                    GroupNode(
                        ref.key,
                        child.metadata.name,
                        gang,
                        min_count,
                        topology=topology or TopologyLevels(),
                    )
                )
        policy = obj.spec.scheduling_policy
        return GroupNode(
            GroupRef(GangApi.POD_GROUP, namespace, name, composite=True).key,
            name,
            policy.gang is not None,
            policy.gang.min_group_count if policy.gang is not None else 1,
            tuple(children),
            composite=True,
            topology=composite_topology(obj),
        )

    return node(cpg, 1)
