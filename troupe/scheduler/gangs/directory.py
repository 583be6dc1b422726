"""``GangDirectory``: what the scheduler knows about groups, kept current by informers.

It implements ``troupe.api.gangs.GroupDirectory`` (``policy``, ``problem``,
``placed_count``) for the queue, the plugins and the pod-group cycle, and is fed by:

- the gang informers (``troupe.kube.gang_informers``): ``upsert`` for an
  added or updated group object of any of the three APIs, ``remove`` for a deleted one;
- the scheduler: ``pod_placed`` when a member is assumed or bound, ``pod_unplaced``
  when it is forgotten, unbound or deleted (KEP-3370 Permit counts assigned + assumed);
- the pod informer: ``pod_seen`` / ``pod_gone`` for every pod, so it knows each
  group's members and the scheduler each names (members naming different
  schedulers are a ``problem``). A group is forgotten once its object and all its
  pods are gone, so nothing is kept per group for ever.

A group whose object does not exist has no policy: its pods wait for it (KEP-4671:
"pods linked to the Workload object will not be scheduled until this Workload object
is created and observed"). A group whose object is malformed is blocked by
``problem``, which says why, naming the object and the field. ``on_change`` callbacks hear
about every group whose object appeared, changed its spec, or went away, so the queue
can re-check gating (KEP-5832 "EventsToRegister": PodGroup created).

CompositePodGroups (KEP-6012) come from the same informers (``upsert_composite`` /
``remove_composite``) and are kept by a ``CompositeDirectory``
(``troupe.scheduler.gangs.composite_directory``) the directory owns. ``entity_ref``
names the group whose queue entity a PodGroup's pods join (the topmost gang composite
above it); a composite group's policy carries its tree (``tree_of``), and its placed
members are those of the PodGroups under it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeAlias

import structlog

from troupe.api.composite import GroupNode
from troupe.api.gangapi import (
    COMPOSITE_POD_GROUP_V1ALPHA3,
    CompositePodGroup,
    V1beta1PodGroup,
    parse_time,
)
from troupe.api.gangapi_kinds import (
    NATIVE_POD_GROUPS,
    TEMPLATES_OBJECTS,
    GroupObject,
    NativePodGroup,
    TemplatesObject,
    api_of,
)
from troupe.api.gangapi_policy import PriorityLookup, policy_of
from troupe.api.gangs import GangApi, GangPolicy, GroupKey, GroupProblem, GroupRef, group_ref_of
from troupe.api.objects import Pod, PodKey
from troupe.scheduler.gangs import composites
from troupe.scheduler.gangs.composite_directory import (
    CompositeDirectory,
    ObjectKey,
    object_key,
    same_policy_inputs,
)
from troupe.scheduler.gangs.members import MemberTally, RulesMoved

log = structlog.get_logger("troupe.gangs")

ChangeCallback: TypeAlias = Callable[[GroupRef], None]


class GangDirectory:
    def __init__(self, priority_of: PriorityLookup | None = None) -> None:
        self._priority_of = priority_of
        self._objects: dict[ObjectKey, GroupObject] = {}
        # Workloads (v1alpha2, v1beta1 or v1alpha3) by "namespace/name": the templates
        # PodGroups and CompositePodGroups refer to.
        self._templates: dict[str, TemplatesObject] = {}
        # Every ref asked or told about, by the object it points at, until forgotten.
        self._refs: dict[ObjectKey, dict[GroupKey, GroupRef]] = {}
        self._verdicts: dict[GroupKey, GangPolicy | GroupProblem] = {}
        self._member_problems: dict[GroupKey, GroupProblem] = {}
        self._placed: dict[GroupKey, set[PodKey]] = {}
        # The group of each key in ``_placed`` (a composite's leaves roll up to it).
        self._placed_refs: dict[GroupKey, GroupRef] = {}
        # Every existing pod naming a group, and what the member rules read.
        self._tally = MemberTally()
        self._callbacks: list[ChangeCallback] = []
        self._watched: dict[GangApi, str] = {}
        # v1alpha3 CompositePodGroups (KEP-6012) and the trees worked out from them.
        self._composite = CompositeDirectory(
            self._objects,
            priority_of=priority_of,
            templates=self.template_workload,
            leaf_verdict=self._verdict,
            leaf_problem=self.problem,
            refs_for_object=self.refs_for_object,
            invalidate=self._invalidate,
            notify=self._notify_ref,
        )

    # --- group objects (from the informers) ---------------------------------------------

    def upsert(self, api: GangApi, obj: GroupObject) -> None:
        """An object of ``api`` was added or updated."""
        if api_of(obj) is not api:
            raise ValueError(f"{type(obj).__name__} is not an object of {api.value}")
        if isinstance(obj, TEMPLATES_OBJECTS):
            self.upsert_templates(obj)
            return
        if isinstance(obj, CompositePodGroup):
            self.upsert_composite(obj)
            return
        m = obj.metadata
        key = object_key(api, m.namespace, m.name)
        old = self._objects.get(key)
        self._objects[key] = obj
        if old is not None and same_policy_inputs(old, obj):
            return
        self._invalidate(key)
        self._notify(api, m.namespace, m.name)
        if composites.parent_of(obj) or (old is not None and composites.parent_of(old)):
            self._composite.changed(m.namespace)

    def remove(self, api: GangApi, namespace: str, name: str) -> None:
        """The object was deleted: its groups lose their policy until it returns."""
        key = object_key(api, namespace, name)
        old = self._objects.pop(key, None)
        if old is None:
            return
        self._invalidate(key)
        self._notify(api, namespace, name)
        for ref in self.refs_for_object(api, namespace, name):
            self._forget_if_unused(ref)
        if composites.parent_of(old):
            self._composite.changed(namespace)

    def upsert_templates(self, wl: TemplatesObject) -> None:
        """A template Workload was added or updated: PodGroups that take their policy
        from one of its templates are re-evaluated (and their groups notified)."""
        m = wl.metadata
        key = f"{m.namespace}/{m.name}"
        old = self._templates.get(key)
        self._templates[key] = wl
        if old is None or old.spec != wl.spec:
            self._templates_changed(m.namespace, m.name)

    def remove_templates(self, namespace: str, name: str) -> None:
        """A template Workload was deleted."""
        if self._templates.pop(f"{namespace}/{name}", None) is not None:
            self._templates_changed(namespace, name)

    # --- CompositePodGroups (KEP-6012), kept by ``CompositeDirectory`` ----------------------

    def upsert_composite(self, cpg: CompositePodGroup) -> None:
        """A CompositePodGroup was added or updated: the trees and the routes of the
        PodGroups under it are worked out again (and their groups notified)."""
        self._composite.upsert(cpg)

    def remove_composite(self, namespace: str, name: str) -> None:
        """A CompositePodGroup was deleted."""
        self._composite.remove(namespace, name)

    def entity_ref(self, ref: GroupRef) -> GroupRef:
        """The group whose queue entity a pod of ``ref`` joins: the topmost gang
        CompositePodGroup above a v1beta1 PodGroup, else ``ref`` itself."""
        return self._composite.entity_ref(ref)

    def tree_of(self, key: GroupKey) -> GroupNode | None:
        """The tree of the composite group ``key`` (None for another group, or a
        composite whose object is gone)."""
        return self._composite.tree_of(key)

    def _templates_changed(self, namespace: str, workload: str) -> None:
        self._composite.templates_changed(namespace, workload)
        # PodGroups taking their policy from one of the Workload's templates.
        for (api, obj_key), obj in list(self._objects.items()):
            if not isinstance(obj, NATIVE_POD_GROUPS) or obj.metadata.namespace != namespace:
                continue
            if _template_workload(obj) == workload:
                self._invalidate((api, obj_key))
                self._notify(api, namespace, obj.metadata.name)

    def template_workload(self, namespace: str, name: str) -> TemplatesObject | None:
        """The template Workload as last seen (at the version watched), or None."""
        return self._templates.get(f"{namespace}/{name}")

    def get(self, api: GangApi, namespace: str, name: str) -> GroupObject | None:
        """The object as last seen (the v1alpha2 PodGroup's conditions, for status)."""
        return self._objects.get(object_key(api, namespace, name))

    def api_version(self, ref: GroupRef) -> str:
        """The version ``ref``'s objects are read at: the object's own when it exists,
        else the version watched for its API (``watch_versions``), else the API's."""
        if ref.composite:
            return COMPOSITE_POD_GROUP_V1ALPHA3
        obj = self._objects.get(object_key(ref.api, ref.namespace, ref.name))
        if obj is not None:
            return obj.api_version
        return self._watched.get(ref.api, ref.api.value)

    def watch_versions(self, versions: Mapping[GangApi, str]) -> None:
        """Which version of each API the informers watch (from discovery)."""
        self._watched = dict(versions)

    def priority_classes_changed(self) -> None:
        """A PriorityClass was added, changed or removed: PodGroups that take their
        priority from a class name are re-evaluated (and their groups notified)."""
        for (api, obj_key), obj in list(self._objects.items()):
            if isinstance(obj, NATIVE_POD_GROUPS) and obj.spec.priority_class_name:
                self._invalidate((api, obj_key))
                self._notify(api, obj.metadata.namespace, obj.metadata.name)

    # --- GroupDirectory ---------------------------------------------------------------------

    def policy(self, ref: GroupRef) -> GangPolicy | None:
        """The group's policy; None while its object is missing. For a malformed
        object this is a placeholder (a gang of 1 created with the object, so queue
        order still holds) and ``problem`` blocks the group; callers check both, as
        the contract says."""
        verdict = self._verdict(ref)
        if isinstance(verdict, GroupProblem):
            created = self._created_of(ref)
            return GangPolicy(gang=True, min_count=1, created=created)
        return verdict

    def problem(self, ref: GroupRef) -> GroupProblem | None:
        """The object's problem (a bad field), else its members' (pods naming
        different schedulers); None when there is none."""
        if ref.composite:
            return self._composite.problem(ref)
        verdict = self._verdict(ref)
        if isinstance(verdict, GroupProblem):
            return verdict
        return self._members_problem(ref)

    def placed_count(self, key: GroupKey) -> int:
        """Members bound or assumed; of a composite, of every leaf under it."""
        tree = self.tree_of(key)
        if tree is not None:
            return sum(len(self._placed.get(leaf.key, ())) for leaf in tree.leaves())
        placed = self._placed.get(key)
        return len(placed) if placed else 0

    def leaf_placed(self, tree: GroupNode) -> dict[GroupKey, int]:
        """Members bound or assumed of each leaf of ``tree``."""
        return {leaf.key: len(self._placed.get(leaf.key, ())) for leaf in tree.leaves()}

    def _created_of(self, ref: GroupRef) -> float:
        if ref.composite:
            return self._composite.created(ref)
        obj = self._objects[object_key(ref.api, ref.namespace, ref.name)]
        return parse_time(obj.metadata.creation_timestamp)

    # --- members ----------------------------------------------------------------------------

    def pod_placed(self, pod: Pod) -> None:
        """A member was assumed or bound."""
        ref = group_ref_of(pod)
        if ref is None:
            return
        self._remember(ref)
        self._placed.setdefault(ref.key, set()).add(pod.key)
        self._placed_refs[ref.key] = ref

    def pod_unplaced(self, pod: Pod) -> None:
        """A member's placement was released (forgotten, unbound, or the pod deleted)."""
        ref = group_ref_of(pod)
        if ref is None:
            return
        placed = self._placed.get(ref.key)
        if placed is None:
            return
        placed.discard(pod.key)
        if not placed:
            del self._placed[ref.key]
            self._placed_refs.pop(ref.key, None)

    def pod_seen(self, pod: Pod) -> None:
        """A pod exists (added or updated): it counts as a member of the group it names
        (and no longer of a group it named before)."""
        ref = group_ref_of(pod)
        key = pod.key
        current = self._tally.group_of(key)
        if current is not None and current != ref:
            self._drop_member(key)
        if ref is None:
            return
        self._remember(ref)
        self._rules_moved(self._tally.seen(ref, pod))

    def pod_gone(self, pod: Pod) -> None:
        """A pod was deleted."""
        if self._tally.group_of(pod.key) is not None:
            self._drop_member(pod.key)

    def member_keys(self, key: GroupKey) -> set[PodKey]:
        """Keys of every existing pod naming the group (a copy)."""
        return self._tally.member_keys(key)

    def placed_groups(self) -> list[GroupKey]:
        """Every group with members bound or assumed: the entity's group, so a gang
        CompositePodGroup stands for the PodGroups under it."""
        keys: dict[GroupKey, None] = {}
        for key in self._placed:
            ref = self._placed_refs.get(key)
            entity = self.entity_ref(ref) if ref is not None else None
            if entity is not None and entity.composite and self.policy(entity) is not None:
                keys[entity.key] = None
            else:
                keys[key] = None
        return list(keys)

    def placed_members(self, key: GroupKey) -> set[PodKey]:
        """Keys of the members bound or assumed (a copy); of a composite, of every
        PodGroup under it."""
        tree = self.tree_of(key)
        if tree is not None:
            return {p for leaf in tree.leaves() for p in self._placed.get(leaf.key, ())}
        return set(self._placed.get(key, ()))

    def finished_count(self, key: GroupKey) -> int:
        """How many existing members have run to completion (Succeeded or Failed)."""
        tree = self.tree_of(key)
        keys = [leaf.key for leaf in tree.leaves()] if tree is not None else [key]
        return sum(self._tally.finished(k) for k in keys)

    def _drop_member(self, pod_key: PodKey) -> None:
        ref, moved = self._tally.drop(pod_key)
        self._rules_moved(moved)
        if ref is not None:
            self._forget_if_unused(ref)

    def _rules_moved(self, moved: list[RulesMoved]) -> None:
        """Drop the cached members problem of each group whose member rules' inputs
        moved; tell the queue where the problem may have come or gone."""
        for ref, notify in moved:
            self._member_problems.pop(ref.key, None)
            if notify:
                self._notify_ref(ref)

    def _forget_if_unused(self, ref: GroupRef) -> None:
        """Forget a group once its object and all its pods are gone."""
        if self._tally.has_members(ref.key):
            return
        if object_key(ref.api, ref.namespace, ref.name) in self._objects:
            return
        self.forget(ref)

    def _members_problem(self, ref: GroupRef) -> GroupProblem | None:
        """The members break a rule of upstream's pod-group cycle (``validatePodGroup``),
        which fails the group with ``SchedulerError``: every member must name the same
        scheduler (the pods of one gang are placed in one cycle of one profile, and a
        member left to another scheduler would be placed without its gang), and the
        members of a standalone PodGroup must have the group's priority
        (``troupe.scheduler.gangs.members``)."""
        found = self._member_problems.get(ref.key)
        if found is not None:
            return found
        found = self._tally.schedulers_problem(ref)
        if found is None:
            verdict = self._verdict(ref)
            obj = self._objects.get(object_key(ref.api, ref.namespace, ref.name))
            found = self._tally.priority_problem(
                ref,
                verdict.priority if isinstance(verdict, GangPolicy) else None,
                obj.api_version if obj is not None else "",
            )
        if found is not None:
            self._member_problems[ref.key] = found
        return found

    # --- refs and change notification -------------------------------------------------------

    def refs_for_object(self, api: GangApi, namespace: str, name: str) -> list[GroupRef]:
        """Every known group pointing at one object (a Workload's pod groups and their
        replica keys), in key order."""
        refs = self._refs.get(object_key(api, namespace, name), {})
        return [refs[k] for k in sorted(refs)]

    def forget(self, ref: GroupRef) -> None:
        """Drop what is remembered about ``ref`` besides its placed members; done by
        the directory itself once the group's object and all its pods are gone."""
        key = object_key(ref.api, ref.namespace, ref.name)
        refs = self._refs.get(key)
        if refs is not None:
            refs.pop(ref.key, None)
            if not refs:
                del self._refs[key]
        self._verdicts.pop(ref.key, None)
        self._member_problems.pop(ref.key, None)

    def on_change(self, callback: ChangeCallback) -> Callable[[], None]:
        """Call ``callback(ref)`` for every known group of an object that appeared,
        changed or disappeared; when no group of it is known yet, once with the
        object's own ref (for a Workload: ``pod_group=""``, match on ``api`` and
        ``object_key``). Returns a function that unregisters the callback."""
        self._callbacks.append(callback)

        def unregister() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return unregister

    # --- internals --------------------------------------------------------------------------

    def _remember(self, ref: GroupRef) -> None:
        refs = self._refs.setdefault(object_key(ref.api, ref.namespace, ref.name), {})
        refs.setdefault(ref.key, ref)

    def _verdict(self, ref: GroupRef) -> GangPolicy | GroupProblem | None:
        if ref.composite:
            return self._composite.verdict(ref)
        verdict = self._verdicts.get(ref.key)
        if verdict is not None:
            return verdict
        obj = self._objects.get(object_key(ref.api, ref.namespace, ref.name))
        if obj is None:
            return None
        # Remembered so that a change of the object drops the cached verdict.
        self._remember(ref)
        verdict = policy_of(obj, ref, self._priority_of, self.template_workload)
        if (
            isinstance(obj, V1beta1PodGroup)
            and composites.parent_of(obj)
            and isinstance(verdict, GangPolicy)
        ):
            chain = self._composite.chain_of(obj)
            if isinstance(chain, GroupProblem):
                verdict = chain
        self._verdicts[ref.key] = verdict
        return verdict

    def _invalidate(self, key: ObjectKey) -> None:
        for group_key in self._refs.get(key, {}):
            self._verdicts.pop(group_key, None)
            # The priority rule compares the members with the object's priority.
            self._member_problems.pop(group_key, None)

    def _notify(self, api: GangApi, namespace: str, name: str) -> None:
        refs = self.refs_for_object(api, namespace, name) or [GroupRef(api, namespace, name)]
        for ref in refs:
            self._notify_ref(ref)

    def _notify_ref(self, ref: GroupRef) -> None:
        # The composite whose entity holds the leaf's pods hears about it too.
        entity = self.entity_ref(ref)
        for target in (ref, entity) if entity != ref else (ref,):
            self._call_back(target)

    def _call_back(self, ref: GroupRef) -> None:
        for callback in list(self._callbacks):
            try:
                callback(ref)
            except Exception as exc:
                # One broken listener must not starve the others of the event.
                log.error(
                    "group change callback failed",
                    group=str(ref),
                    error=repr(exc),
                    exc_info=exc,
                )


def _template_workload(obj: NativePodGroup) -> str:
    """The Workload whose template a standalone PodGroup names ("" for none)."""
    if isinstance(obj, V1beta1PodGroup):
        return obj.spec.workload_ref.workload_name if obj.spec.workload_ref else ""
    ref = obj.spec.pod_group_template_ref
    return ref.workload_name if ref is not None else ""
