"""The pod-group cycle: one attempt of a whole gang, all or nothing.

KEP-4671 Beta "Workload Scheduling Cycle". ``GroupCycle.run`` reads top-down, as
upstream's ``scheduleOnePodGroup`` (kubernetes/kubernetes
``pkg/scheduler/schedule_one_podgroup.go``):

1. **open** a ``GroupAttempt`` (``troupe.scheduler.gangs.attempt``): the group's
   policy, its members still to place (largest first), the members already bound
   or assumed; a group whose object went away, that is held, or that has nothing to
   place now goes back to the queue (or is done) without an attempt;
2. **decide**: the pod-group scheduling algorithm
   (``troupe.scheduler.gangs.group_algorithm``) places, counts the quorum, preempts
   or permits on the live NodeTable (one snapshot: it does not yield) and returns a
   ``GroupResult``: placed, waiting on its preemption, or rejected;
3. **submit** (``troupe.scheduler.gangs.submit``): bind the placed quorum, or tell
   the members and the group why not and requeue it.

Binding N pods is not atomic in Kubernetes. troupe never starts binding a gang
unless its quorum is placed, never binds a member before every member's PreBind has
succeeded, and if a binding then fails for good and the group falls below quorum,
members whose binding has not been posted yet are released and the group is
retried (``troupe.scheduler.gangs.admission``, docs/gangs.md "What troupe
guarantees").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from troupe.api.gangs import GroupKey
from troupe.api.podinfo import PodInfo
from troupe.queue.entity import QueuedGroupInfo
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cache import Cache
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.gangs.attempt import GroupAttempt
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.gangs.group_algorithm import GroupAlgorithm
from troupe.scheduler.gangs.placement import member_order
from troupe.scheduler.gangs.submit import GroupSubmit
from troupe.scheduler.observe.stats import AttemptStats


@dataclass(eq=False, kw_only=True)
class GroupCycle:
    groups: GangDirectory
    queue: SchedulingQueue
    cache: Cache
    algorithm: GroupAlgorithm
    submit: GroupSubmit
    stats: AttemptStats
    # Groups that must not be scheduled now (their bound members are being
    # evicted, troupe.scheduler.gangs.recovery).
    held: Callable[[GroupKey], bool] | None = None

    async def run(self, fwk: Framework, entity: QueuedGroupInfo, cycle: int) -> None:
        """One attempt of the group; the SLI of its members follows them until bound."""
        attempt = self._open(fwk, entity, cycle)
        if attempt is not None:
            await self.submit.submit(attempt, self.algorithm.schedule(attempt))
        for key in entity.members:
            if key not in self.cache:
                self.stats.forget_member(key)

    def _open(self, fwk: Framework, entity: QueuedGroupInfo, cycle: int) -> GroupAttempt | None:
        """The attempt; None when there is nothing to place now, the group handed back
        to the queue (upstream's ``skipPodGroupPodSchedule``)."""
        start = time.perf_counter()
        self.stats.track_members(entity.members, entity.attempts, entity.initial_attempt_timestamp)
        ref = entity.ref
        policy = self.groups.policy(ref)
        if policy is None or not entity.members or (self.held and self.held(ref.key)):
            # The group object went away meanwhile (back to the gated pool), or the
            # group is held: retried on the next event.
            self.queue.add_unschedulable_if_not_present(entity, cycle)
            return None
        # A member already placed (its binding in flight) is counted in ``already``
        # and never placed twice. A member whose name is still held by a deleted
        # pod being bound waits until that binding has settled (it fails on the UID
        # precondition), as a lone pod does in schedule_one.
        fresh: list[PodInfo] = []
        stale: list[str] = []
        for m in entity.members.values():
            cached = self.cache.uid_of(m.key)
            if cached is None:
                fresh.append(m)
            elif cached != m.pod.metadata.uid:
                stale.append(m.key)
        if not fresh:
            if stale:
                self.queue.requeue_group_remainder(entity, stale, cycle, unschedulable_plugins=())
            else:
                # Every member is placed already (bound, or its binding in flight).
                self.queue.done(entity.key, entity)
            return None
        tree = policy.tree
        return GroupAttempt(
            fwk,
            entity,
            policy,
            tuple(member_order(fresh)),
            # Members bound or assumed before this attempt (the cache reports this
            # attempt's assumptions to the directory too: count before placing).
            already=self.groups.placed_count(ref.key),
            cycle=cycle,
            start=start,
            before=self.groups.leaf_placed(tree) if tree is not None else {},
        )
