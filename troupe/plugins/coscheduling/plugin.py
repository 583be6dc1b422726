"""Coscheduling: scheduler-plugins' gang plugin, a barrier at Permit.

troupe ships it so that a KubeSchedulerConfiguration written for scheduler-plugins
runs unchanged, and the benchmark (``bench/``) uses it as the baseline that troupe's
pod-group cycle is measured against. It follows upstream
``pkg/coscheduling/coscheduling.go`` and ``core/core.go``; the framework calls it at
QueueSort, PreFilter, PostFilter, Reserve/Unreserve and Permit, and the queue asks
``events_to_register`` which events may help a pod it rejected.

- QueueSort: higher pod priority first; then the group's creation time for members
  of a gang, the pod's first queueing time otherwise (both wall clock); then the
  pod key.
- PreFilter turns a pod away, unresolvable (no preemption), when its group was backed
  off recently, when fewer pods exist for the group than ``minMember``, or when the
  cluster's free capacity cannot hold ``minResources`` (checked at most once per
  ``permitWaitingTimeSeconds`` per group).
- Permit: once the group's bound and assumed pods reach ``minMember`` every waiting
  sibling is allowed; until then the pod waits, for the group's
  ``scheduleTimeoutSeconds`` or ``permitWaitingTimeSeconds``.
- PostFilter: a member that fits nowhere while the gang is more than
  ``podGroupRejectPercentage`` short of quorum rejects the waiting siblings and backs
  the group off for ``podGroupBackoffSeconds``.
- Unreserve (a timeout, a rejection, a failed binding) rejects every waiting sibling,
  so this plugin never lets part of a gang through.

Any gang the ``GroupDirectory`` knows is handled the same way, whichever API declared
it; a group with the Basic policy (no quorum) is scheduled as if it had no group.
Where troupe differs from upstream, the comment says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from troupe.api.cycle import CycleState
from troupe.api.events import Action, ClusterEvent, ClusterEventWithHint, Resource
from troupe.api.framework import (
    Diagnosis,
    Handle,
    PluginTraits,
    PostFilterResult,
    PreFilterResult,
    Sortable,
    WaitingPod,
)
from troupe.api.gangs import GangPolicy, GroupKey, GroupRef, group_ref_of
from troupe.api.nodetable import NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.resources import PODS
from troupe.api.status import SUCCESS, Code, Status
from troupe.plugins.coscheduling.args import CoschedulingArgs
from troupe.plugins.coscheduling.capacity import format_gap, resource_gap
from troupe.plugins.coscheduling.contract import PODS_TO_ACTIVATE, GroupMembers
from troupe.plugins.coscheduling.expiring import ExpiringKeys
from troupe.queue.entity import QueuedPodInfo

GROUP_NOT_FOUND = "PodGroup not found"
CANNOT_FIND_GROUP = "can not find pod group"
REJECTED_IN_POST_FILTER = "optimistic rejection in PostFilter"
REJECTED_IN_UNRESERVE = "rejection in Unreserve"

# util.DefaultWaitTime: the wait when neither the group nor the args set one.
DEFAULT_WAIT_SECONDS = 60.0

UNSCHEDULED_POD_ADD = ClusterEvent(Resource.POD, Action.ADD, "UnscheduledPodAdd")
POD_GROUP_ADD_OR_UPDATE = ClusterEvent(
    Resource.POD_GROUP, Action.ADD | Action.UPDATE, "PodGroupAddOrUpdate"
)

_UNSET = object()


def wait_seconds(policy: GangPolicy, permit_waiting_time_seconds: int) -> float:
    """How long a member waits at Permit (upstream ``util.GetWaitTimeDuration`` as
    Permit uses it): the group's ``scheduleTimeoutSeconds``, else the args', else 60 s;
    a result of zero falls back to the args' value."""
    default = float(permit_waiting_time_seconds)
    if policy.timeout_seconds is not None:
        wait = float(policy.timeout_seconds)
    elif default:
        wait = default
    else:
        wait = DEFAULT_WAIT_SECONDS
    return wait if wait else default


class Coscheduling:
    name = "Coscheduling"
    # Members meet at its Permit barrier one by one (scheduler-plugins).
    traits = PluginTraits(gang_permit_barrier=True)

    def __init__(self, args: CoschedulingArgs | None, handle: Handle) -> None:
        self._args = args if args is not None else CoschedulingArgs()
        self._handle = handle
        self._groups = handle.groups
        # Sibling counts need more than the GroupDirectory contract (contract.py).
        self._members = self._groups if isinstance(self._groups, GroupMembers) else None
        clock = handle.clock
        # Queue timestamps are monotonic, group creation times wall clock: one fixed
        # offset keeps the order consistent for as long as entities sit in the heap.
        self._wall_offset = clock.wall() - clock.now()
        self._permitted = ExpiringKeys(clock)
        self._backed_off = ExpiringKeys(clock)

    # --- QueueSort -----------------------------------------------------------------

    def less(self, a: Sortable, b: Sortable) -> bool:
        if a.priority != b.priority:
            return a.priority > b.priority
        since_a, since_b = self._queued_since(a), self._queued_since(b)
        if since_a == since_b:
            return a.key < b.key
        return since_a < since_b

    def _queued_since(self, entity: Sortable) -> float:
        """Upstream ``GetCreationTimestamp``: the group's creation for a member of a
        group that exists, else the pod's first queueing time."""
        if isinstance(entity, QueuedPodInfo):
            ref = self._ref(entity.pod_info)
            policy = self._groups.policy(ref) if ref is not None else None
            # A zero creation time means the directory does not know it.
            if policy is not None and policy.gang and policy.created > 0:
                return policy.created
        return entity.timestamp + self._wall_offset

    # --- PreFilter -----------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        ref = self._ref(pod)
        if ref is None:
            return None, SUCCESS
        problem = self._groups.problem(ref)
        if problem is not None:
            return None, Status.unresolvable(str(problem))
        policy = self._groups.policy(ref)
        if policy is None:
            # Upstream lets the pod through here and rejects it at Permit; turning it
            # away now saves a Filter pass and an assume, with the same message.
            return None, Status.unresolvable(GROUP_NOT_FOUND)
        if not policy.gang:
            return None, SUCCESS
        key = ref.key
        if key in self._backed_off:
            return None, Status.unresolvable(f"podGroup {key} failed recently")
        members = self._member_count(key)
        if members is not None and members < policy.min_count:
            return None, Status.unresolvable(
                f"pre-filter pod {pod.pod.metadata.name} cannot find enough sibling pods, "
                f"current pods number: {members}, minMember of group: {policy.min_count}"
            )
        if not policy.min_resources or key in self._permitted:
            return None, SUCCESS
        # Upstream counts minMember pod slots as part of minResources.
        request = {**policy.min_resources, PODS: policy.min_count}
        placed = self._groups.placed_count(key) > 0
        gap = resource_gap(table, request, key, self._key_of, placed)
        if gap:
            return None, Status.unresolvable(format_gap(gap))
        self._permitted.add(key, self._args.permit_waiting_time_seconds)
        return None, SUCCESS

    # --- PostFilter ----------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        ref = self._ref(pod)
        if ref is None:
            # Upstream says "can not find pod group" for every pod without a group
            # too; a pod that never had one gets no message from this plugin.
            return PostFilterResult(), Status.unschedulable()
        policy = self._groups.policy(ref)
        if policy is None:
            return PostFilterResult(), Status.unschedulable(CANNOT_FIND_GROUP)
        if not policy.gang:
            return PostFilterResult(), Status.unschedulable()
        key, quorum = ref.key, policy.min_count
        assigned = self._groups.placed_count(key)
        if assigned >= quorum:
            # Enough members hold their place already: this one failing is no
            # reason to give up the others.
            return PostFilterResult(), Status.unschedulable()
        # A gang only a small share short of quorum keeps its waiting members, so
        # later members may still complete it (unplaced / minMember <= percentage).
        if (quorum - assigned) * 100 <= self._args.pod_group_reject_percentage * quorum:
            return PostFilterResult(), Status.unschedulable()
        # Upstream's bet: when one member fits nowhere, its siblings likely will not
        # either, so release what the waiting ones hold now.
        self._reject_waiting(key, REJECTED_IN_POST_FILTER)
        backoff = self._args.pod_group_backoff_seconds
        if backoff > 0:
            members = self._member_count(key)
            # Only a group whose pods all exist is backed off: one still being
            # created failed for lack of members, not of room. Unknown counts as all.
            if members is None or members >= quorum:
                self._backed_off.add(key, backoff)
        self._permitted.discard(key)
        return PostFilterResult(), Status.unschedulable(
            f"PodGroup {key} gets rejected due to Pod {pod.pod.metadata.name} "
            "is unschedulable even after PostFilter"
        )

    # --- Reserve / Unreserve -------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        # Nothing to hold: Reserve exists so that Unreserve is called.
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        gang = self._gang_ref(pod)
        if gang is None:
            return
        self._reject_waiting(gang.key, REJECTED_IN_UNRESERVE)
        self._permitted.discard(gang.key)

    # --- Permit --------------------------------------------------------------------

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        ref = self._ref(pod)
        if ref is None:
            return SUCCESS, 0.0
        policy = self._groups.policy(ref)
        if policy is None:
            return Status.unschedulable(GROUP_NOT_FOUND), 0.0
        if not policy.gang:
            return SUCCESS, 0.0
        key = ref.key
        # troupe assumes a pod before Permit, so the placed count includes this pod;
        # upstream adds one to a snapshot taken before the assume.
        placed = self._groups.placed_count(key)
        if placed >= policy.min_count:
            for waiting in self._waiting_members(key):
                waiting.allow(self.name)
            return SUCCESS, 0.0
        if placed <= 1:
            # The first member to wait asks for its siblings to be retried now
            # (upstream ActivateSiblings, only for the 0th pod: scheduler-plugins#682).
            self._activate_siblings(state, pod, key)
        return Status(Code.WAIT), wait_seconds(policy, self._args.permit_waiting_time_seconds)

    def _activate_siblings(self, state: CycleState, pod: PodInfo, key: GroupKey) -> None:
        to_activate = state.get(PODS_TO_ACTIVATE)
        if to_activate is None or self._members is None:
            return
        to_activate.update(k for k in self._members.member_keys(key) if k != pod.key)

    # --- EnqueueExtensions ---------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        # Upstream registers these without queueing hints: a new pod may complete a
        # gang, a created or changed group may now be satisfiable.
        return (
            ClusterEventWithHint(UNSCHEDULED_POD_ADD),
            ClusterEventWithHint(POD_GROUP_ADD_OR_UPDATE),
        )

    # --- helpers -------------------------------------------------------------------

    def _ref(self, pod: PodInfo) -> GroupRef | None:
        """The pod's group, computed once per PodInfo (the pod never changes under it)."""
        cached = pod.extra.get(self.name, _UNSET)
        if cached is None or isinstance(cached, GroupRef):
            return cached
        ref = group_ref_of(pod.pod)
        pod.extra[self.name] = ref
        return ref

    def _key_of(self, pod: PodInfo) -> GroupKey | None:
        ref = self._ref(pod)
        return ref.key if ref is not None else None

    def _gang_ref(self, pod: PodInfo) -> GroupRef | None:
        """The pod's group if it exists and is a gang."""
        ref = self._ref(pod)
        if ref is None:
            return None
        policy = self._groups.policy(ref)
        return ref if policy is not None and policy.gang else None

    def _member_count(self, key: GroupKey) -> int | None:
        return len(self._members.member_keys(key)) if self._members is not None else None

    def _waiting_members(self, key: GroupKey) -> list[WaitingPod]:
        return [w for w in self._handle.iterate_waiting_pods() if self._key_of(w.pod) == key]

    def _reject_waiting(self, key: GroupKey, message: str) -> None:
        for waiting in self._waiting_members(key):
            waiting.reject(self.name, message)
