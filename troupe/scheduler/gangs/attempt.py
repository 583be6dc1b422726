"""What one attempt of a pod group is given, and what it decides.

The pod-group cycle (``troupe.scheduler.gangs.group_cycle``) opens a
``GroupAttempt`` for a popped group, hands it to the pod-group scheduling algorithm
(``troupe.scheduler.gangs.group_algorithm``), which places, counts and permits and
returns a ``GroupResult``, and hands that result to the one submit step
(``troupe.scheduler.gangs.submit``), which binds, waits or reports. Upstream draws
the same line between ``podGroupSchedulingAlgorithm`` (which "does not manage the
scheduling queue, trigger binding, or execute failure handling") and
``submitPodGroupAlgorithmResult`` (kubernetes/kubernetes
``pkg/scheduler/schedule_one_podgroup.go``).

Placement (``troupe.scheduler.gangs.placement``), topology
(``troupe.scheduler.gangs.topology``) and preemption
(``troupe.scheduler.gangs.preemption``) take the attempt as one value instead of the
clump ``(fwk, entity, policy, members, already)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from troupe.api.cycle import CycleState, GroupState
from troupe.api.framework import Diagnosis, DisruptionPlan
from troupe.api.gangs import GangPolicy, GroupKey, GroupRef
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.queue.entity import QueuedGroupInfo
from troupe.scheduler.cycle.results import ScheduleResult
from troupe.scheduler.framework.runtime import Framework

Failure = tuple[PodInfo, Status, Diagnosis | None]
"""A member that did not fit (or was refused), with why."""


@dataclass(slots=True)
class Placement:
    """A member placed: assumed in the cache and reserved, its cycle state kept."""

    info: PodInfo
    state: CycleState
    result: ScheduleResult


@dataclass(frozen=True, slots=True)
class GroupAttempt:
    """One attempt of one group, as the algorithm is given it."""

    fwk: Framework
    entity: QueuedGroupInfo
    policy: GangPolicy
    # The members to place now, largest first (``placement.member_order``).
    members: tuple[PodInfo, ...]
    # Members bound or assumed before the attempt (counted toward the quorum).
    already: int
    cycle: int
    # When the attempt began (``time.perf_counter``), for its duration.
    start: float
    # A composite's members bound or assumed before the attempt, per leaf PodGroup.
    before: Mapping[GroupKey, int] = field(default_factory=dict)
    # What the members' plugins share for the length of the attempt
    # (``CycleState.group``); cleared when the attempt ends.
    group: GroupState = field(default_factory=GroupState)

    @property
    def ref(self) -> GroupRef:
        return self.entity.ref

    def with_members(self, members: tuple[PodInfo, ...], already: int) -> GroupAttempt:
        """The same attempt over other members (a dry run over some of them)."""
        return dataclasses.replace(self, members=members, already=already)


Result = Literal["preempted", "unschedulable", "rejected", "waiting", "never", "error"]


@dataclass(frozen=True, slots=True)
class PreemptionOutcome:
    """What gang preemption did for an attempt below its quorum (KEP-5710)."""

    result: Result
    # What the gang's members and group are told, after the placement's own reasons.
    message: str
    plan: DisruptionPlan | None = None


Outcome = Literal["placed", "waiting", "rejected"]


@dataclass(frozen=True, slots=True)
class GroupResult:
    """What the algorithm decided for an attempt.

    ``placed``: the quorum is placed and permitted; ``placements`` stay assumed and
    reserved for the binding cycle. ``waiting``: below quorum, and a preemption made
    (or is making) room for the gang. ``rejected``: below quorum, nothing to do but
    retry. In both of these every placement was reverted already; ``placements``
    says what did fit, for the report.
    """

    outcome: Outcome
    placements: tuple[Placement, ...] = ()
    failures: tuple[Failure, ...] = ()
    # A composite's placements of leaves below their own quorum (reverted).
    held_back: tuple[Placement, ...] = ()
    # The minResources the cluster lacks ("Insufficient cpu").
    shortfall: str = ""
    # Where the attempt got, when the placer says it better than a pod count
    # ("best rack r7: 6 of 8 pods fit", a composite's groups).
    progress: str = ""
    # Why, when it is not the members' own reasons (a Permit rejection).
    why: str = ""
    # The placement the gang went to ("" without topology).
    domain: str = ""
    preemption: PreemptionOutcome | None = None

    @property
    def error(self) -> bool:
        """An internal error, not a verdict: retried after backoff."""
        return any(status.code is Code.ERROR for _, status, _ in self.failures)
