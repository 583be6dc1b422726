"""``CompositeDirectory``: the CompositePodGroup (KEP-6012) part of ``GangDirectory``.

``GangDirectory`` (``troupe.scheduler.gangs.directory``) owns one and hands it the
v1alpha3 CompositePodGroups its informers see (``upsert`` / ``remove``). It keeps them
by ``namespace/name`` with what was worked out from them: each composite group's
policy, whose tree (``troupe.scheduler.gangs.composites``) holds the PodGroups and
composites under it with each level's quorum, and the composite refs asked about, so
that a change of a composite, of a PodGroup naming one, or of the template Workload
they name re-works the trees and routes of that namespace and notifies their groups.
``entity_ref`` routes a leaf PodGroup's pods to the topmost gang composite above it.

What it needs of the directory (the group objects, a leaf's verdict and problem, the
template Workloads, invalidating and notifying groups) it is given as a read-only view
and callables, so it imports nothing of the directory. The directory's object keys and
the spec comparison both use are defined here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeAlias

from troupe.api.composite import GroupNode, required_pods
from troupe.api.gangapi import CompositePodGroup, V1beta1PodGroup, parse_time
from troupe.api.gangapi_kinds import GroupObject
from troupe.api.gangapi_policy import PriorityLookup, TemplateLookup
from troupe.api.gangs import GangApi, GangPolicy, GroupKey, GroupProblem, GroupRef
from troupe.scheduler.gangs import composites

ObjectKey: TypeAlias = tuple[GangApi, str]  # (api, "namespace/name")


def object_key(api: GangApi, namespace: str, name: str) -> ObjectKey:
    return api, f"{namespace}/{name}"


def same_policy_inputs(old: GroupObject, new: GroupObject) -> bool:
    """Whether a policy computed from ``old`` still holds for ``new``: a status write
    (ours, every few seconds) must not make the queue re-check every group."""
    om, nm = old.metadata, new.metadata
    return (
        om.uid == nm.uid and om.creation_timestamp == nm.creation_timestamp and old.spec == new.spec
    )


class CompositeDirectory:
    def __init__(
        self,
        objects: Mapping[ObjectKey, GroupObject],
        *,
        priority_of: PriorityLookup | None,
        templates: TemplateLookup,
        leaf_verdict: Callable[[GroupRef], GangPolicy | GroupProblem | None],
        leaf_problem: Callable[[GroupRef], GroupProblem | None],
        refs_for_object: Callable[[GangApi, str, str], list[GroupRef]],
        invalidate: Callable[[ObjectKey], None],
        notify: Callable[[GroupRef], None],
    ) -> None:
        # The directory's group objects (read only), and what it does for a group.
        self._objects = objects
        self._priority_of = priority_of
        self._templates = templates
        self._leaf_verdict = leaf_verdict
        self._leaf_problem = leaf_problem
        self._refs_for_object = refs_for_object
        self._invalidate = invalidate
        self._notify = notify
        # v1alpha3 CompositePodGroups by "namespace/name", and what was worked out from
        # them: each composite group's verdict (its tree), and the composite refs asked
        # about, to notify when a composite changes.
        self._composites: dict[str, CompositePodGroup] = {}
        self._verdicts: dict[GroupKey, GangPolicy] = {}
        self._refs: dict[GroupKey, GroupRef] = {}

    def upsert(self, cpg: CompositePodGroup) -> None:
        """A CompositePodGroup was added or updated: the trees and the routes of the
        PodGroups under it are worked out again (and their groups notified)."""
        m = cpg.metadata
        key = f"{m.namespace}/{m.name}"
        old = self._composites.get(key)
        self._composites[key] = cpg
        if old is None or not same_policy_inputs(old, cpg):
            self.changed(m.namespace)

    def remove(self, namespace: str, name: str) -> None:
        """A CompositePodGroup was deleted."""
        if self._composites.pop(f"{namespace}/{name}", None) is not None:
            self.changed(namespace)

    def chain_of(self, leaf: V1beta1PodGroup) -> list[CompositePodGroup] | GroupProblem:
        """The composites above ``leaf``, parent first, or why its layout is wrong or
        incomplete (``troupe.scheduler.gangs.composites.chain_of``)."""
        return composites.chain_of(leaf, self._composites, self._templates)

    def entity_ref(self, ref: GroupRef) -> GroupRef:
        """The group whose queue entity a pod of ``ref`` joins: the topmost gang
        CompositePodGroup above a v1beta1 PodGroup (KEP-6012: placed in one cycle),
        else ``ref`` itself (no parent, only basic composites above it, or a layout
        that is wrong or incomplete: the leaf is then held with the problem)."""
        if ref.api is not GangApi.POD_GROUP or ref.composite or not self._composites:
            return ref
        obj = self._objects.get(object_key(ref.api, ref.namespace, ref.name))
        if not isinstance(obj, V1beta1PodGroup) or not composites.parent_of(obj):
            return ref
        chain = self.chain_of(obj)
        if isinstance(chain, GroupProblem):
            return ref
        return composites.entity_ref(ref, chain)

    def verdict(self, ref: GroupRef) -> GangPolicy | None:
        """The policy of a composite group: its tree of the PodGroups and composites
        that name it (at any depth), each level's quorum; None while the composite
        does not exist."""
        verdict = self._verdicts.get(ref.key)
        if verdict is not None:
            return verdict
        cpg = self._composites.get(ref.object_key)
        if cpg is None:
            return None
        self._refs[ref.key] = ref
        tree = self._tree(cpg)
        spec = cpg.spec
        priority = spec.priority
        if priority is None and spec.priority_class_name and self._priority_of is not None:
            priority = self._priority_of(spec.priority_class_name)
        policy = GangPolicy(
            gang=True,
            min_count=required_pods(tree),
            priority=priority,
            created=parse_time(cpg.metadata.creation_timestamp),
            tree=tree,
            topology=tree.topology,
        )
        self._verdicts[ref.key] = policy
        return policy

    def problem(self, ref: GroupRef) -> GroupProblem | None:
        """A problem of any leaf under the composite holds the whole composite: its
        pods are placed in one cycle (asked afresh: members' problems come and go)."""
        policy = self.verdict(ref)
        if policy is None or policy.tree is None:
            return None
        for leaf in policy.tree.leaves():
            leaf_ref = GroupRef(GangApi.POD_GROUP, ref.namespace, leaf.name)
            problem = self._leaf_problem(leaf_ref)
            if problem is not None:
                return problem
        return None

    def created(self, ref: GroupRef) -> float:
        """When the composite was created (0 while it does not exist)."""
        cpg = self._composites.get(ref.object_key)
        return parse_time(cpg.metadata.creation_timestamp) if cpg is not None else 0.0

    def _tree(self, cpg: CompositePodGroup) -> GroupNode:
        leaves = [o for o in self._objects.values() if isinstance(o, V1beta1PodGroup)]
        return composites.tree_of(cpg, self._composites, leaves, self._leaf_policy)

    def _leaf_policy(self, leaf: V1beta1PodGroup) -> GangPolicy | GroupProblem | None:
        return self._leaf_verdict(
            GroupRef(GangApi.POD_GROUP, leaf.metadata.namespace, leaf.metadata.name)
        )

    def tree_of(self, key: GroupKey) -> GroupNode | None:
        """The tree of the composite group ``key`` (None for another group, or a
        composite whose object is gone)."""
        ref = self._refs.get(key)
        verdict = self.verdict(ref) if ref is not None else None
        return verdict.tree if verdict is not None else None

    def changed(self, namespace: str) -> None:
        """A composite, or a PodGroup naming one, changed in ``namespace``: every tree
        and every route there is worked out again, and their groups notified so the
        queue moves pods to the entity they now join."""
        refs: list[GroupRef] = []
        for key, ref in list(self._refs.items()):
            if ref.namespace == namespace:
                self._verdicts.pop(key, None)
                refs.append(ref)
        for (api, obj_key), obj in list(self._objects.items()):
            in_namespace = obj.metadata.namespace == namespace
            if isinstance(obj, V1beta1PodGroup) and in_namespace and composites.parent_of(obj):
                self._invalidate((api, obj_key))
                refs.extend(self._refs_for_object(api, namespace, obj.metadata.name))
        for cpg in self._composites.values():
            if cpg.metadata.namespace == namespace:
                ref = GroupRef(GangApi.POD_GROUP, namespace, cpg.metadata.name, composite=True)
                if ref.key not in self._refs:
                    refs.append(ref)
        for ref in refs:
            self._notify(ref)
        # Composites deleted: their groups were told (their pods move); forget them.
        for key, ref in list(self._refs.items()):
            if ref.object_key not in self._composites:
                del self._refs[key]

    def templates_changed(self, namespace: str, workload: str) -> None:
        """A template Workload changed: a v1alpha3 Workload's composite templates decide
        whether a tree's layout is valid, so the trees naming it are worked out again."""
        if any(
            cpg.metadata.namespace == namespace
            and cpg.spec.workload_ref is not None
            and cpg.spec.workload_ref.workload_name == workload
            for cpg in self._composites.values()
        ):
            self.changed(namespace)
