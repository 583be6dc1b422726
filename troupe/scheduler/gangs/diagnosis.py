"""What a failed group attempt says: its words, and its record for ``troupe explain``.

The submit step (``troupe.scheduler.gangs.submit``) turns a rejected or waiting
``GroupResult`` into ``Verdict`` words (``gang ns/train: 3 of 4 required pods fit;
0/8 nodes are available: ...``) for the pods' conditions, the events and the group's
condition, and into the typed ``GroupDiagnosis`` (``troupe.api.diagnosis``) the
explain endpoint serves. Nothing here decides anything: the algorithm
(``troupe.scheduler.gangs.group_algorithm``) did.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from troupe.api.diagnosis import (
    GroupDiagnosis,
    GroupObject,
    MemberDiagnosis,
    PreemptionDiagnosis,
    Quorum,
)
from troupe.api.gangs import GroupRef
from troupe.api.status import Code, Status
from troupe.scheduler.cycle.failure import failure_message
from troupe.scheduler.gangs.attempt import Failure, GroupAttempt, GroupResult, PreemptionOutcome
from troupe.scheduler.gangs.placement import member_order
from troupe.scheduler.gangs.report import (
    REASON_NOT_MEET_MIN_MEMBER,
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the members and the group are told about a failed attempt."""

    # Where the attempt got ("3 of 4 required pods fit").
    state: str
    # Why it got no further.
    why: str
    # The whole message: "<noun> <group>: <state>; <why>[; <preemption>]".
    message: str


def verdict(attempt: GroupAttempt, result: GroupResult) -> Verdict:
    ref, policy, already = attempt.ref, attempt.policy, attempt.already
    why = result.why
    if not why:
        if result.shortfall:
            why = f"the cluster does not have the group's minResources free: {result.shortfall}"
        elif result.failures:
            why = failures_message(result.failures)
        else:
            why = "not enough members"
    # A composite's or a topology's state (how far it got) comes from the algorithm.
    state = result.progress
    if not state and already >= policy.min_count:
        # Late members of a gang that has its quorum, none of which fit.
        state = f"{already} of {policy.min_count} required pods placed"
    elif not state:
        state = f"{already + len(result.placements)} of {policy.min_count} required pods fit"
    message = f"{noun(ref)} {ref.display}: {state}; {why}"
    if result.preemption is not None:
        message += f"; {result.preemption.message}"
    return Verdict(state, why, message)


def member_reason(status: Status | None) -> str:
    """A member's ``PodScheduled`` reason: it fit but the gang did not (None), it did
    not fit, or an internal error stopped it."""
    if status is None:
        return REASON_NOT_MEET_MIN_MEMBER
    return REASON_SCHEDULER_ERROR if status.code is Code.ERROR else REASON_UNSCHEDULABLE


def group_diagnosis(attempt: GroupAttempt, result: GroupResult, said: Verdict) -> GroupDiagnosis:
    """The structured diagnosis of a failed attempt (``troupe explain``)."""
    ref, policy, entity = attempt.ref, attempt.policy, attempt.entity
    failed = {info.key: (status, diagnosis) for info, status, diagnosis in result.failures}
    where = {p.info.key: p.result.node for p in result.placements}
    members: list[MemberDiagnosis] = []
    for info in member_order(list(entity.members.values())):
        found = failed.get(info.key)
        if found is None:
            fits_on = where.get(info.key, "")
            entry = MemberDiagnosis.of(
                info, None, None, REASON_NOT_MEET_MIN_MEMBER, "", fits_on=fits_on
            )
            members.append(entry)
            continue
        status, diagnosis = found
        text = failure_message(status, diagnosis)
        members.append(MemberDiagnosis.of(info, status, diagnosis, member_reason(status), text))
    levels = policy.topology
    return GroupDiagnosis(
        name=ref.display,
        key=ref.key,
        group=GroupObject(
            ref.kind,
            ref.api.value,
            ref.namespace,
            ref.name,
            ref.pod_group + (f"/{ref.replica_key}" if ref.replica_key else ""),
        ),
        message=said.message,
        why=said.why,
        quorum=Quorum(
            min_count=policy.min_count,
            min_count_field=ref.min_count_field,
            already_placed=attempt.already,
            fit=attempt.already + len(result.placements),
            pending=len(entity.members),
            state=said.state,
        ),
        min_resources_shortfall=result.shortfall,
        required=levels.required,
        preferred=tuple(levels.preferred),
        members=tuple(members),
        preemption=_preemption(result.preemption),
        time=time.time(),
    )


def _preemption(preemption: PreemptionOutcome | None) -> PreemptionDiagnosis | None:
    if preemption is None:
        return None
    plan = preemption.plan
    return PreemptionDiagnosis(
        preemption.result,
        preemption.message,
        tuple(v.key for v in plan.victims) if plan is not None else (),
        dict(plan.nominated) if plan is not None else {},
    )


def noun(ref: GroupRef) -> str:
    """How messages call the group: ``gang``, or ``composite`` for a CompositePodGroup."""
    return "composite" if ref.composite else "gang"


def failures_message(failures: tuple[Failure, ...]) -> str:
    """Why members did not fit, over all of them: one member's reasons when every
    member failed alike, else each distinct reason with how many members it stopped
    (most first)."""
    counts: dict[str, int] = {}
    for _, status, diagnosis in failures:
        text = failure_message(status, diagnosis)
        counts[text] = counts.get(text, 0) + 1
    if len(counts) == 1:
        (text,) = counts
        return text
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return "; ".join(f"{n} pod(s): {text}" for text, n in ranked)
