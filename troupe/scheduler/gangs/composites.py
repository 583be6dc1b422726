"""CompositePodGroup layouts (KEP-6012): a leaf's chain of parents, a composite's tree.

``CompositeDirectory`` (``troupe.scheduler.gangs.composite_directory``, owned by
``GangDirectory``) keeps the v1alpha3 CompositePodGroups by ``namespace/name`` and calls
these when it works out a leaf PodGroup's verdict and route (``chain_of``,
``entity_ref``) or a composite's policy (``tree_of``). Upstream's API server validates
each object alone; the layout rules that span objects are the scheduler's, reported with
upstream's ``Invalid`` reason (the ``CompositePodGroupInitiallyScheduled`` reasons of
v1alpha3/types.go): a cycle, a tree deeper than ``MAX_TREE_DEPTH`` levels, groups of
different Workloads, and, where the Workload is watched at ``v1alpha3`` (the only version
with ``compositePodGroupTemplates``), templates that do not match the tree: KEP-6012's
templates mirror the groups, so a root composite names a top-level composite template of
its Workload, a child composite a child composite template of its parent's template, and
a PodGroup under a composite one of its parent template's PodGroup templates. A parent
that does not exist yet is no error: the leaf waits for it; nor is a Workload that does
not exist (yet), or one watched at ``v1beta1``: its templates are then not compared. Pure
functions over the objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from troupe.api.composite import GroupNode
from troupe.api.gangapi import (
    MAX_TREE_DEPTH,
    REASON_INVALID,
    CompositePodGroup,
    CompositePodGroupTemplate,
    V1alpha3Workload,
    V1beta1PodGroup,
    V1beta1PodGroupTemplate,
)
from troupe.api.gangapi_policy import TemplateLookup
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
    leaf: V1beta1PodGroup,
    composites: Mapping[str, CompositePodGroup],
    templates: TemplateLookup | None = None,
) -> list[CompositePodGroup] | GroupProblem:
    """The composites above ``leaf``, parent first, or why its layout is wrong (a
    cycle, deeper than ``MAX_TREE_DEPTH``, groups of different Workloads, templates of
    their v1alpha3 Workload that do not match the tree, ``templates`` looking it up) or
    incomplete (a parent that does not exist yet: ``waiting``)."""
    namespace, name = leaf.metadata.namespace, leaf.metadata.name
    ref = GroupRef(GangApi.POD_GROUP, namespace, name)

    def problem(message: str, *, waiting: bool = False, field: str = _PARENT_FIELD) -> GroupProblem:
        outcome = "Unschedulable" if waiting else REASON_INVALID
        return GroupProblem(
            ref,
            field,
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
    workload = (
        templates(namespace, next(iter(workloads.values())))
        if templates is not None and workloads
        else None
    )
    if isinstance(workload, V1alpha3Workload):
        found = templates_problem(leaf, chain, workload)
        if found is not None:
            return problem(found[1], field=found[0])
    return chain


def _names(templates: Iterable[CompositePodGroupTemplate | V1beta1PodGroupTemplate]) -> str:
    return ", ".join(f'"{t.name}"' for t in templates) or "none"


def _all_composite_templates(
    templates: Iterable[CompositePodGroupTemplate],
) -> list[CompositePodGroupTemplate]:
    found: list[CompositePodGroupTemplate] = []
    for template in templates:
        found.append(template)
        found.extend(_all_composite_templates(template.composite_pod_group_templates))
    return found


def templates_problem(
    leaf: V1beta1PodGroup, chain: Sequence[CompositePodGroup], workload: V1alpha3Workload
) -> tuple[str, str] | None:
    """(field of ``leaf``, message) when the templates the groups of ``chain`` (parent
    first, up to the root) and ``leaf`` name in their ``workloadRef`` do not follow the
    tree of ``workload``'s composite templates (KEP-6012): the root composite names a
    top-level composite template, every other composite a child composite template of
    its parent's template, and the leaf (when it names a template) one of the PodGroup
    templates of its parent's template. None when they do."""
    namespace = leaf.metadata.namespace
    where = f"Workload {namespace}/{workload.metadata.name}"
    everywhere = _all_composite_templates(workload.spec.composite_pod_group_templates)
    known = {t.name for t in everywhere}
    choices: Sequence[CompositePodGroupTemplate] = workload.spec.composite_pod_group_templates
    parent: tuple[CompositePodGroup, CompositePodGroupTemplate] | None = None
    for cpg in reversed(chain):
        ref = cpg.spec.workload_ref
        wanted = ref.template_name if ref is not None else ""
        template = next((t for t in choices if t.name == wanted), None)
        if template is None:
            named = (
                f"CompositePodGroup {namespace}/{cpg.metadata.name} "
                f'spec.workloadRef.templateName: composite pod group template "{wanted}"'
            )
            if wanted not in known:
                message = f"{named} doesn't exist in {where} (it has {_names(everywhere)})"
            elif parent is None:
                message = (
                    f"{named} is not a top-level template of {where}, as a root "
                    f"CompositePodGroup's must be (they are {_names(choices)})"
                )
            else:
                message = (
                    f'{named} is not a child of template "{parent[1].name}" of its parent '
                    f"{namespace}/{parent[0].metadata.name} in {where} (its composite "
                    f"templates are {_names(choices)})"
                )
            return _PARENT_FIELD, message
        parent = (cpg, template)
        choices = template.composite_pod_group_templates
    ref = leaf.spec.workload_ref
    if parent is None or ref is None or not ref.template_name:
        return None
    wanted = ref.template_name
    children = parent[1].pod_group_templates
    if any(t.name == wanted for t in children):
        return None
    return (
        "spec.workloadRef.templateName",
        f'pod group template "{wanted}" is not a child of template "{parent[1].name}" of '
        f"its parent {namespace}/{parent[0].metadata.name} in {where} (its pod group "
        f"templates are {_names(children)})",
    )


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
