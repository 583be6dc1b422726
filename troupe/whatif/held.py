"""Why a target is held back before any attempt, from the cluster's objects alone: the
answer ``troupe explain`` gives at once, without asking the scheduler or running one.

The scheduler's queue does not try a gang whose group object is missing or malformed,
or whose pods number fewer than its ``minCount`` (KEP-4671 GangScheduling's PreEnqueue,
``troupe.queue.pre_enqueue``; pods held by their own ``schedulingGates`` do not count),
nor a pod with scheduling gates. ``held_back`` applies the same rules to a
``ClusterState`` with the same policy reader the scheduler uses
(``troupe.api.gangapi_policy.policy_of``) and words the answer as the scheduler words
it on the pods (``gang ml/train: waiting for minCount pods from a gang to appear in
scheduling queue (spec.minMember is 8; 6 of its pods are ready to schedule or
placed)``). Rules it does not evaluate itself (the member rules, a CompositePodGroup's
tree) are read from what the scheduler already told the pods: every pending member's
``PodScheduled`` condition with reason ``SchedulingGated``. Called by
``troupe.cli.explain`` before any diagnosis is fetched or computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from troupe.api.gangapi_kinds import MODEL_AT, TEMPLATES_MODEL_AT, GroupObject, TemplatesObject
from troupe.api.gangapi_policy import policy_of
from troupe.api.gangs import GangPolicy, GroupProblem, GroupRef, group_ref_of
from troupe.api.objects import Pod
from troupe.queue import MIN_COUNT_MESSAGE, missing_group_message
from troupe.whatif.state import ClusterState, Target, pod_key

Obj = dict[str, Any]
GATED = "SchedulingGated"  # the PodScheduled reason of a pod held before any attempt


@dataclass(frozen=True, slots=True)
class Held:
    """Why the target is not attempted, and where that was read."""

    message: str
    # "group objects" (computed here) or "pod conditions" (the scheduler's own words).
    source: str
    pods: tuple[str, ...] = ()  # the pods it holds
    hint: str = ""  # what would release it, when that is known


def held_back(state: ClusterState, target: Target) -> Held | None:
    """Why the target's queue entry is held back, or None when it is attempted."""
    pending = state.members(target)
    if not pending:
        return None
    keys = tuple(sorted(pod_key(p) for p in pending))
    if target.kind == "pod":
        gates = _gates(pending[0])
        if gates:
            return Held(
                f"waiting for scheduling gates: {', '.join(gates)}",
                "pod objects",
                keys,
                "the controller that added the gates removes them (spec.schedulingGates)",
            )
        return _told(pending, keys)
    found = _group_rule(state, target, pending)
    if found is not None:
        message, hint = found
        return Held(message, "group objects", keys, hint)
    return _told(pending, keys)


def _gates(pod: Obj) -> list[str]:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return [str(g.get("name")) for g in gates if isinstance(g, dict)]


def _told(pending: list[Obj], keys: tuple[str, ...]) -> Held | None:
    """The scheduler's own word when it told every pending member it holds them."""
    messages = set()
    for pod in pending:
        conditions = (pod.get("status") or {}).get("conditions") or []
        found = [c for c in conditions if c.get("type") == "PodScheduled"]
        if not found or found[0].get("reason") != GATED or found[0].get("status") != "False":
            return None
        messages.add(str(found[0].get("message") or ""))
    return Held("; ".join(sorted(messages)), "pod conditions", keys)


def _ref(pending: list[Obj]) -> GroupRef | None:
    try:
        return group_ref_of(Pod.model_validate(pending[0]))
    except ValidationError:
        return None


def _group_rule(state: ClusterState, target: Target, pending: list[Obj]) -> tuple[str, str] | None:
    """The gang checks of upstream's PreEnqueue on the objects: the group object
    exists, is well formed, and enough of its pods exist. (message, hint) or None."""
    ref = _ref(pending)
    if ref is None:
        return None
    obj = state.group_object(target)
    if obj is None:
        return (
            f"gang {ref.display}: {missing_group_message(ref)}: no {ref.kind} "
            f"{target.namespace}/{target.name} exists (named by the pods' {ref.member_field})",
            f"create the {ref.kind} {target.namespace}/{target.name}",
        )
    policy = _policy(state, obj, ref)
    if isinstance(policy, GroupProblem):
        return str(policy), f"fix {policy.field}" if policy.field else ""
    if policy is None or not policy.gang:
        return None
    everyone = pending + state.bound_members(target)
    gated = sorted(pod_key(p) for p in pending if _gates(p))
    have = len(everyone) - len(gated)
    if have >= policy.min_count:
        return None
    message = (
        f"gang {ref.display}: {MIN_COUNT_MESSAGE} ({ref.min_count_field} is "
        f"{policy.min_count}; {have} of its pods are ready to schedule or placed)"
    )
    if gated:
        message += (
            f"; {len(gated)} more wait for their own schedulingGates and do not count "
            f"({', '.join(gated[:3])}{', ...' if len(gated) > 3 else ''})"
        )
    missing = policy.min_count - have
    hint = f"create {missing} more of its pods"
    if gated:
        hint += " or lift the scheduling gates of those waiting"
    if have > 0:
        hint += f", or lower {ref.min_count_field} to {have}"
    return message, hint


def _policy(state: ClusterState, obj: Obj, ref: GroupRef) -> GangPolicy | GroupProblem | None:
    """The group's policy as the scheduler reads it (None: a kind this does not read,
    a CompositePodGroup, or an object that does not parse)."""
    model = MODEL_AT.get(str(obj.get("apiVersion") or ""))
    if model is None:
        return None
    try:
        parsed: GroupObject = model.model_validate(obj)
    except ValidationError:
        return None

    def templates(namespace: str, name: str) -> TemplatesObject | None:
        for wl in state.of("workloads"):
            meta = wl["metadata"]
            if meta.get("namespace") == namespace and meta["name"] == name:
                templates_model = TEMPLATES_MODEL_AT.get(str(wl.get("apiVersion") or ""))
                if templates_model is not None:
                    try:
                        return templates_model.model_validate(wl)
                    except ValidationError:
                        return None
        return None

    try:
        return policy_of(parsed, ref, None, templates)
    except TypeError:  # a Workload of templates, or a composite: not a group's policy
        return None
