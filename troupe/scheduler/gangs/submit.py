"""The one step that acts on a group attempt's result: bind, wait or report.

Upstream's ``submitPodGroupAlgorithmResult`` (kubernetes/kubernetes
``pkg/scheduler/schedule_one_podgroup.go``). The pod-group cycle
(``troupe.scheduler.gangs.group_cycle``) hands every ``GroupResult`` of the
algorithm (``troupe.scheduler.gangs.group_algorithm``) to ``GroupSubmit.submit``:

- ``placed``: the quorum goes to binding together (``troupe.scheduler.gangs.
  admission``); members that did not fit go back as the group's remainder and say
  why; a composite's members of leaves below their own quorum wait for it;
- ``rejected`` or ``waiting`` (on its preemption): every member is told why
  (``PodScheduled=False``: ``CoschedulingNotMeetMinMember`` for those that would
  fit, so autoscalers do not scale up for them, KEP-3370; else ``Unschedulable`` or
  ``SchedulerError``), one ``FailedScheduling`` event goes on the group and its
  pods, the group's condition and ``troupe explain``'s record are written, and the
  group goes back to the queue.

Either way the attempt's shared plugin state (``GroupAttempt.group``) ends here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog

from troupe.api.framework import Diagnosis
from troupe.api.status import Status
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.gangs.admission import Admission, GangAdmission
from troupe.scheduler.gangs.attempt import GroupAttempt, GroupResult
from troupe.scheduler.gangs.diagnosis import (
    failures_message,
    group_diagnosis,
    member_reason,
    noun,
    verdict,
)
from troupe.scheduler.gangs.preemption import GangPreemption
from troupe.scheduler.gangs.report import REASON_NOT_MEET_MIN_MEMBER, GangReporter
from troupe.scheduler.observe.explain import Explanations
from troupe.scheduler.observe.stats import AttemptStats

log = structlog.get_logger("troupe.gang")


@dataclass(eq=False, kw_only=True)
class GroupSubmit:
    queue: SchedulingQueue
    admission: GangAdmission
    preemption: GangPreemption
    stats: AttemptStats
    report: GangReporter
    explanations: Explanations | None = None

    async def submit(self, attempt: GroupAttempt, result: GroupResult) -> None:
        # The attempt is over: what its members' plugins shared goes with it.
        attempt.group.clear()
        for p in result.placements:
            p.state.group = None
        if result.outcome == "placed":
            admission = self._admit(attempt, result)
            await self.admission.admit(attempt.fwk, result.placements, attempt.start, admission)
        else:
            self._reject(attempt, result)

    def _admit(self, attempt: GroupAttempt, result: GroupResult) -> Admission:
        """The quorum goes to binding; the members that did not fit wait."""
        ref, policy, entity = attempt.ref, attempt.policy, attempt.entity
        self._timed(attempt, "scheduled")
        self.preemption.forget(ref.key)
        if self.explanations is not None:
            self.explanations.group_gone(ref.key)
        placed: set[str] = {p.info.key for p in result.placements}
        remainder = [k for k in entity.members if k not in placed]
        if remainder:
            plugins = set().union(*(_plugins(st, d) for _, st, d in result.failures))
            self.queue.requeue_group_remainder(
                entity, remainder, attempt.cycle, unschedulable_plugins=plugins
            )
            self._report_remainder(attempt, result)
        else:
            self.queue.done(entity.key)
        log.debug(
            "gang admitted",
            group=ref.key,
            domain=result.domain,
            placed=len(placed),
            bound_before=attempt.already,
            minCount=policy.min_count,
        )
        return Admission(entity, attempt.cycle, policy.min_count, unposted=placed, tree=policy.tree)

    def _reject(self, attempt: GroupAttempt, result: GroupResult) -> None:
        """Tell the members and the group why (and what preemption did for it), and
        hand the group back to the queue."""
        ref, entity, profile = attempt.ref, attempt.entity, attempt.fwk.name
        said = verdict(attempt, result)
        preemption = result.preemption
        nominated = preemption.plan.nominated if preemption and preemption.plan else {}
        plugins: set[str] = set()
        for _, status, diagnosis in result.failures:
            plugins |= _plugins(status, diagnosis)
        # An internal error: retried after backoff, whatever the events (as a pod).
        entity.unschedulable_plugins = set() if result.error else plugins
        failed = {info.key: status for info, status, _ in result.failures}
        for info in entity.members.values():
            self.report.pod(
                info,
                member_reason(failed.get(info.key)),
                said.message,
                nominated_node_name=nominated.get(info.key),
            )
        if self.explanations is not None:
            self.explanations.group_failed(group_diagnosis(attempt, result, said))
        self.report.group_event(ref, said.message)
        self.report.group_condition(
            ref, "SchedulerError" if result.error else "Unschedulable", said.message
        )
        outcome = "error" if result.error else "unschedulable"
        self._timed(attempt, "waiting_on_preemption" if result.outcome == "waiting" else outcome)
        if result.error:
            log.error("error scheduling gang", group=ref.key, message=said.message, profile=profile)
        else:
            log.debug("gang rejected", group=ref.key, message=said.message, profile=profile)
        self.queue.add_unschedulable_if_not_present(entity, attempt.cycle)

    def _report_remainder(self, attempt: GroupAttempt, result: GroupResult) -> None:
        """Members beyond the quorum that did not fit: the gang goes ahead without
        them for now, and they say why. A composite's members of leaves below their
        own quorum wait for their PodGroup's quorum."""
        ref, policy = attempt.ref, attempt.policy
        placed = attempt.already + len(result.placements)
        state = result.progress or f"{placed} of {policy.min_count} required pods placed"
        if result.failures:
            message = f"{noun(ref)} {ref.display}: {state}; {failures_message(result.failures)}"
            for info, status, _ in result.failures:
                self.report.pod(info, member_reason(status), message)
        for p in result.held_back:
            message = (
                f"{noun(ref)} {ref.display}: {result.progress}; the pod's PodGroup is below "
                "its own minCount, so none of its pods is bound yet"
            )
            self.report.pod(p.info, REASON_NOT_MEET_MIN_MEMBER, message)

    def _timed(self, attempt: GroupAttempt, result: str) -> None:
        entity_type = "compositepodgroup" if attempt.ref.composite else "podgroup"
        seconds = time.perf_counter() - attempt.start
        self.stats.group_attempt(result, attempt.fwk.name, seconds, entity_type)


def _plugins(status: Status, diagnosis: Diagnosis | None) -> set[str]:
    """The plugins whose queueing hints may release a member that did not fit."""
    plugins = set(diagnosis.unschedulable_plugins) if diagnosis is not None else set()
    if status.plugin:
        plugins.add(status.plugin)
    return plugins
