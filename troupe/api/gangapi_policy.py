"""What a group object demands: its ``GangPolicy``, or the ``GroupProblem`` that stops it.

``policy_of(obj, ref, priority_of)`` is called by ``troupe.scheduler.gangs``'s
directory whenever it needs the policy of a group whose object it holds; the three
per-API functions are the same rules, one API each. A problem names the object, the
offending field path and what is wrong with it, in the words upstream validation or
the upstream plugin would use, so the scheduler can report it on the pods and the
object without a traceback and without blocking any other group.

The API server validates most of this for the built-in kinds, and the CRD schema
for the scheduler-plugins PodGroup; the checks are repeated because troupe must not
trust a cluster whose CRD was installed without a schema (older scheduler-plugins
manifests ship ``minResources`` as a free string).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from troupe.api.gangapi import (
    WORKLOAD_MAX_POD_GROUPS,
    CompositePodGroup,
    CoschedulingPodGroup,
    PodGroup,
    PodGroupTemplateReference,
    SchedulingPolicy,
    V1beta1PodGroup,
    Workload,
    parse_time,
)
from troupe.api.gangapi_kinds import (
    TEMPLATES_OBJECTS,
    GroupObject,
    NativePodGroup,
    TemplatesObject,
    pod_group_templates_in,
)
from troupe.api.gangs import GangApi, GangPolicy, GroupProblem, GroupRef
from troupe.api.quantity import MAX_AMOUNT, QuantityError, max_amount_text, resource_to_int
from troupe.api.topology import levels_from

PriorityLookup = Callable[[str], int | None]
"""The value of the PriorityClass of that name, or None when there is none."""

TemplateLookup = Callable[[str, str], TemplatesObject | None]
"""The Workload ``(namespace, name)`` at the version watched (v1alpha2, v1beta1 or
v1alpha3), or None when it does not exist."""

_DISRUPTION_MODES = ("Pod", "PodGroup")


def ref_of_object(obj: CoschedulingPodGroup | NativePodGroup) -> GroupRef:
    """The group a single-group object defines (a Workload holds several)."""
    api = GangApi.COSCHEDULING if isinstance(obj, CoschedulingPodGroup) else GangApi.POD_GROUP
    return GroupRef(api, obj.metadata.namespace, obj.metadata.name)


def policy_of(
    obj: GroupObject,
    ref: GroupRef,
    priority_of: PriorityLookup | None = None,
    templates: TemplateLookup | None = None,
) -> GangPolicy | GroupProblem:
    """The policy ``obj`` sets for the group ``ref`` (which must name ``obj``)."""
    if isinstance(obj, CoschedulingPodGroup):
        return coscheduling_policy(obj)
    if isinstance(obj, Workload):
        return workload_policy(obj, ref)
    if isinstance(obj, TEMPLATES_OBJECTS):
        raise TypeError(f"a Workload holds templates, not group {ref.key}'s policy")
    if isinstance(obj, CompositePodGroup):
        raise TypeError(f"a CompositePodGroup's policy is its tree's, not group {ref.key}'s")
    if isinstance(obj, V1beta1PodGroup):
        return v1beta1_pod_group_policy(obj, priority_of, templates)
    return pod_group_policy(obj, priority_of, templates)


def coscheduling_policy(pg: CoschedulingPodGroup) -> GangPolicy | GroupProblem:
    """A scheduler-plugins PodGroup is always a gang of ``minMember``."""
    ref = ref_of_object(pg)
    spec = pg.spec
    if spec.min_member < 1:
        return GroupProblem(ref, "spec.minMember", f"must be at least 1, got {spec.min_member}")
    timeout = spec.schedule_timeout_seconds
    if timeout is not None and timeout < 0:
        return GroupProblem(
            ref, "spec.scheduleTimeoutSeconds", f"must not be negative, got {timeout}"
        )
    min_resources: dict[str, int] = {}
    for name in sorted(spec.min_resources):
        text = spec.min_resources[name]
        field = f"spec.minResources[{name}]"
        try:
            amount = resource_to_int(name, text)
        except QuantityError as err:
            return GroupProblem(ref, field, f"invalid quantity {text!r}: {err.reason}")
        if amount < 0:
            return GroupProblem(ref, field, f"must not be negative, got {text!r}")
        if amount > MAX_AMOUNT:
            limit = max_amount_text(name)
            return GroupProblem(ref, field, f"must be at most {limit}, got {text!r}")
        min_resources[name] = amount
    levels, field, message = levels_from(pg.metadata.annotations)
    if field:
        return GroupProblem(ref, field, message)
    return GangPolicy(
        gang=True,
        min_count=spec.min_member,
        topology=levels,
        min_resources=min_resources,
        # scheduler-plugins GetWaitTimeDuration: unset or 0 means the plugin default.
        timeout_seconds=float(timeout) if timeout else None,
        created=parse_time(pg.metadata.creation_timestamp),
    )


def _policy_problem(ref: GroupRef, policy: SchedulingPolicy, path: str) -> GroupProblem | None:
    # A oneOf union (+oneOf=PolicySelection): exactly one member set.
    if policy.basic is None and policy.gang is None:
        return GroupProblem(ref, path, "must set exactly one of basic or gang, got neither")
    if policy.basic is not None and policy.gang is not None:
        return GroupProblem(ref, path, "must set exactly one of basic or gang, got both")
    if policy.gang is not None and policy.gang.min_count < 1:
        return GroupProblem(
            ref, f"{path}.gang.minCount", f"must be at least 1, got {policy.gang.min_count}"
        )
    return None


def _from_union(
    policy: SchedulingPolicy, created: float, priority: int | None = None
) -> GangPolicy:
    if policy.gang is not None:
        return GangPolicy(
            gang=True, min_count=policy.gang.min_count, priority=priority, created=created
        )
    # Basic: members are scheduled one by one, each its own quorum.
    return GangPolicy(gang=False, min_count=1, priority=priority, created=created)


# Group ResourceClaims (KEP-5729) need a claim allocated for the whole group and
# reserved for it; troupe does not allocate devices yet, and scheduling the group as
# if it named no claim would start pods without the devices they were promised.
RESOURCE_CLAIMS_UNSUPPORTED = (
    "group ResourceClaims are not supported yet by troupe: the group is not scheduled "
    "until its claims are removed or it is left to a scheduler that allocates them"
)


def v1beta1_pod_group_policy(
    pg: V1beta1PodGroup,
    priority_of: PriorityLookup | None = None,
    templates: TemplateLookup | None = None,
) -> GangPolicy | GroupProblem:
    """A Kubernetes 1.37 v1beta1 PodGroup: its own policy (a missing one is taken from
    the template ``spec.workloadRef`` names, as for v1alpha2), priority, the
    ``disruptionMode`` union, ``preemptionPolicy`` and topology keys. ``gang.minCount``
    is mutable in 1.37: the policy is recomputed on every change of the object, so a
    new quorum applies from the group's next cycle."""
    ref = ref_of_object(pg)
    version = pg.api_version
    spec = pg.spec
    policy, path = spec.scheduling_policy, "spec.schedulingPolicy"
    if policy.basic is None and policy.gang is None and spec.workload_ref is not None:
        template_ref = PodGroupTemplateReference(
            workload_name=spec.workload_ref.workload_name,
            pod_group_template_name=spec.workload_ref.template_name,
        )
        found = _template_policy(ref, template_ref, templates, "spec.workloadRef", version)
        if isinstance(found, GroupProblem):
            return found
        policy, path = found
    problem = _policy_problem(ref, policy, path)
    if problem is not None:
        return GroupProblem(ref, problem.field, problem.message, api_version=version)
    mode = spec.disruption_mode
    disrupt_all = mode is not None and mode.all is not None
    if mode is not None and mode.all is not None and mode.single is not None:
        return GroupProblem(
            ref,
            "spec.disruptionMode",
            "must set exactly one of single or all, got both",
            api_version=version,
        )
    if disrupt_all and policy.basic is not None:
        return GroupProblem(
            ref,
            "spec.disruptionMode",
            "all is invalid with the basic scheduling policy",
            api_version=version,
        )
    if spec.resource_claims:
        names = ", ".join(f'"{c.name}"' for c in spec.resource_claims)
        return GroupProblem(
            ref,
            "spec.resourceClaims",
            f"{RESOURCE_CLAIMS_UNSUPPORTED} (the group names {names})",
            api_version=version,
        )
    priority = spec.priority
    if priority is None and spec.priority_class_name and priority_of is not None:
        priority = priority_of(spec.priority_class_name)
    constraints = spec.scheduling_constraints
    keys = tuple(t.key for t in constraints.topology) if constraints else ()
    levels, field, message = levels_from(pg.metadata.annotations, keys)
    if field:
        return GroupProblem(ref, field, message, api_version=version)
    base = _from_union(policy, parse_time(pg.metadata.creation_timestamp), priority)
    return replace(
        base,
        disrupt_all=disrupt_all,
        preemption_policy=spec.preemption_policy,
        topology=levels,
    )


def workload_policy(wl: Workload, ref: GroupRef) -> GangPolicy | GroupProblem:
    """The policy of the pod group ``ref.pod_group`` of a Workload. Every replica key
    is its own gang with the same policy (KEP-4671); no timeout field exists, so the
    profile's default applies (upstream: a fixed 5 minutes)."""
    groups = wl.spec.pod_groups
    if len(groups) > WORKLOAD_MAX_POD_GROUPS:
        return GroupProblem(
            ref,
            "spec.podGroups",
            f"must have at most {WORKLOAD_MAX_POD_GROUPS} items, got {len(groups)}",
        )
    for index, group in enumerate(groups):
        if group.name != ref.pod_group:
            continue
        problem = _policy_problem(ref, group.policy, f"spec.podGroups[{index}].policy")
        if problem is not None:
            return problem
        levels, field, message = levels_from(wl.metadata.annotations)
        if field:
            return GroupProblem(ref, field, message)
        base = _from_union(group.policy, parse_time(wl.metadata.creation_timestamp))
        return replace(base, topology=levels)
    # The GangScheduling plugin's PreEnqueue message, word for word, then which
    # field of the pods names the pod group and what the Workload has instead.
    names = ", ".join(f'"{g.name}"' for g in groups) or "none"
    return GroupProblem(
        ref,
        "spec.podGroups",
        f'pod group "{ref.pod_group}" doesn\'t exist for a workload "{wl.metadata.name}" '
        f"(named by its pods' spec.workloadRef.podGroup; the workload has {names})",
    )


def pod_group_policy(
    pg: PodGroup,
    priority_of: PriorityLookup | None = None,
    templates: TemplateLookup | None = None,
) -> GangPolicy | GroupProblem:
    """A standalone PodGroup (KEP-5832): its own policy, priority and disruption mode.

    KEP-5832 copies the template's policy into the PodGroup when it is created
    ("Copy/Inline"), so a PodGroup's own ``schedulingPolicy`` wins and a later change
    of the Workload does not touch it. A PodGroup without one (written by a client
    that did not copy it) takes the policy of the template ``podGroupTemplateRef``
    names; a missing Workload or template is a problem naming the field."""
    ref = ref_of_object(pg)
    spec = pg.spec
    policy, path = spec.scheduling_policy, "spec.schedulingPolicy"
    template_ref = spec.pod_group_template_ref
    if policy.basic is None and policy.gang is None and template_ref is not None:
        found = _template_policy(ref, template_ref, templates)
        if isinstance(found, GroupProblem):
            return found
        policy, path = found
    problem = _policy_problem(ref, policy, path)
    if problem is not None:
        return problem
    mode = spec.disruption_mode
    if mode is not None and mode not in _DISRUPTION_MODES:
        supported = ", ".join(f'"{m}"' for m in _DISRUPTION_MODES)
        return GroupProblem(
            ref, "spec.disruptionMode", f'unsupported value "{mode}": supported values: {supported}'
        )
    # Admission resolves the class into spec.priority; an object written before that
    # (or by a client that skipped it) still gets its class's value when we know it.
    priority = spec.priority
    if priority is None and spec.priority_class_name and priority_of is not None:
        priority = priority_of(spec.priority_class_name)
    constraints = spec.scheduling_constraints
    keys = tuple(t.key for t in constraints.topology) if constraints else ()
    levels, field, message = levels_from(pg.metadata.annotations, keys)
    if field:
        return GroupProblem(ref, field, message)
    base = _from_union(policy, parse_time(pg.metadata.creation_timestamp), priority)
    return replace(base, topology=levels)


def _template_policy(
    ref: GroupRef,
    template_ref: PodGroupTemplateReference,
    templates: TemplateLookup | None,
    field: str = "spec.podGroupTemplateRef",
    version: str = "",
) -> tuple[SchedulingPolicy, str] | GroupProblem:
    """The policy of the template ``template_ref`` names, and its path for messages
    (``version``: the PodGroup's, when it is not v1alpha2)."""
    template_field = "templateName" if field == "spec.workloadRef" else "podGroupTemplateName"
    name = template_ref.workload_name
    if not name:
        return GroupProblem(
            ref,
            f"{field}.workloadName",
            "must be set when spec.schedulingPolicy is not",
            api_version=version,
        )
    workload = templates(ref.namespace, name) if templates is not None else None
    if workload is None:
        return GroupProblem(
            ref,
            f"{field}.workloadName",
            f"Workload {version or GangApi.POD_GROUP.value} {ref.namespace}/{name} does not exist",
            api_version=version,
        )
    wanted = template_ref.pod_group_template_name
    # At v1alpha3 the templates under the Workload's composite templates count too
    # (template names are unique in the whole Workload, KEP-6012).
    listed = pod_group_templates_in(workload)
    for at, template in listed:
        if template.name == wanted:
            path = f"Workload {ref.namespace}/{name} {at}.schedulingPolicy"
            return template.effective_policy, path
    names = ", ".join(f'"{t.name}"' for _, t in listed) or "none"
    return GroupProblem(
        ref,
        f"{field}.{template_field}",
        f'pod group template "{wanted}" doesn\'t exist in Workload {ref.namespace}/{name} '
        f"(it has {names})",
        api_version=version,
    )
