"""The gang contract: which group a pod belongs to, and what the group demands.

Three APIs put pods into groups (DESIGN.md "Gang APIs to accept"):

- scheduler-plugins ``scheduling.x-k8s.io/v1alpha1`` PodGroup: label
  ``scheduling.x-k8s.io/pod-group: <name>`` in the pod's namespace;
- Kubernetes 1.35 ``scheduling.k8s.io/v1alpha1`` Workload: ``spec.workloadRef
  {name, podGroup, podGroupReplicaKey}``; each replica key is its own gang (KEP-4671);
- Kubernetes 1.36 ``scheduling.k8s.io/v1alpha2`` PodGroup, and the same PodGroup at
  ``v1beta1`` in 1.37: ``spec.schedulingGroup.podGroupName`` (KEP-5832). ``GangApi``
  names the API, not the version the cluster serves it at.

``group_ref_of(pod)`` names the group; a ``GroupDirectory`` (kept by
``troupe.scheduler.gangs`` from the informers) answers what that group's policy is.
The queue, the plugins and the pod-group cycle all speak these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from troupe.api.group_key import GroupKey as GroupKey
from troupe.api.objects import Pod, PodKey
from troupe.api.topology import TopologyLevels

if TYPE_CHECKING:
    from troupe.api.composite import GroupNode


POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


class GangApi(StrEnum):
    COSCHEDULING = "scheduling.x-k8s.io/v1alpha1"  # PodGroup (scheduler-plugins CRD)
    WORKLOAD = "scheduling.k8s.io/v1alpha1"  # Workload, pods via spec.workloadRef
    POD_GROUP = "scheduling.k8s.io/v1alpha2"  # PodGroup, pods via spec.schedulingGroup


MEMBER_FIELD: dict[GangApi, str] = {
    GangApi.COSCHEDULING: f"metadata.labels[{POD_GROUP_LABEL}]",
    GangApi.WORKLOAD: "spec.workloadRef",
    GangApi.POD_GROUP: "spec.schedulingGroup.podGroupName",
}


@dataclass(frozen=True, slots=True)
class GroupRef:
    """A pod's group: the API object it names and, for Workloads, which pod group
    and replica inside it."""

    api: GangApi
    namespace: str
    name: str
    pod_group: str = ""
    replica_key: str = ""
    # A v1alpha3 CompositePodGroup (KEP-6012): the gang of groups whose leaf PodGroups'
    # pods are queued and placed together (``api`` is the PodGroup's: pods join leaves).
    composite: bool = False

    @property
    def key(self) -> GroupKey:
        base = f"{self.namespace}/{self.name}"
        if self.composite:
            return GroupKey(f"scheduling.k8s.io/CompositePodGroup:{base}")
        if self.api is GangApi.WORKLOAD:
            base += f"/{self.pod_group}"
            if self.replica_key:
                base += f"/{self.replica_key}"
        if self.api is GangApi.COSCHEDULING:
            return GroupKey(base)
        # The standalone PodGroup is one API at several versions: its key names none.
        prefix = "scheduling.k8s.io/PodGroup" if self.api is GangApi.POD_GROUP else self.api.value
        return GroupKey(f"{prefix}:{base}")

    @property
    def object_key(self) -> str:
        """``namespace/name`` of the API object holding the policy."""
        return f"{self.namespace}/{self.name}"

    @property
    def display(self) -> str:
        """How messages name the group, whichever API it comes from: ``namespace/name``
        of its object, and for a Workload's gang which pod group and replica."""
        text = self.object_key
        if self.api is GangApi.WORKLOAD:
            text += f' pod group "{self.pod_group}"'
            if self.replica_key:
                text += f' replica "{self.replica_key}"'
        return text

    @property
    def kind(self) -> str:
        """The kind of the object holding the policy."""
        if self.composite:
            return "CompositePodGroup"
        return "Workload" if self.api is GangApi.WORKLOAD else "PodGroup"

    @property
    def member_field(self) -> str:
        """The pod field that names the group."""
        return MEMBER_FIELD[self.api]

    @property
    def min_count_field(self) -> str:
        """The object field that sets the gang's quorum."""
        if self.api is GangApi.COSCHEDULING:
            return "spec.minMember"
        if self.api is GangApi.WORKLOAD:
            return f"spec.podGroups[{self.pod_group}].policy.gang.minCount"
        if self.composite:
            return "spec.schedulingPolicy.gang.minGroupCount"
        return "spec.schedulingPolicy.gang.minCount"

    def __str__(self) -> str:
        return self.key


def group_ref_of(pod: Pod) -> GroupRef | None:
    """The group ``pod`` joins, or None for a pod scheduled on its own. A pod naming
    groups in several APIs joins the first of ``group_refs_of``; the others do not
    count it."""
    ns = pod.metadata.namespace
    sg = pod.spec.scheduling_group
    if sg is not None and sg.pod_group_name:
        return GroupRef(GangApi.POD_GROUP, ns, sg.pod_group_name)
    wr = pod.spec.workload_ref
    if wr is not None and wr.name:
        return GroupRef(GangApi.WORKLOAD, ns, wr.name, wr.pod_group, wr.pod_group_replica_key)
    name = pod.metadata.labels.get(POD_GROUP_LABEL)
    if name:
        return GroupRef(GangApi.COSCHEDULING, ns, name)
    return None


def group_refs_of(pod: Pod) -> list[GroupRef]:
    """Every group ``pod`` names, the one it joins first: the native PodGroup
    (``spec.schedulingGroup``), then the Workload (``spec.workloadRef``), then the
    scheduler-plugins label, newest API first."""
    ns = pod.metadata.namespace
    refs: list[GroupRef] = []
    sg = pod.spec.scheduling_group
    if sg is not None and sg.pod_group_name:
        refs.append(GroupRef(GangApi.POD_GROUP, ns, sg.pod_group_name))
    wr = pod.spec.workload_ref
    if wr is not None and wr.name:
        refs.append(GroupRef(GangApi.WORKLOAD, ns, wr.name, wr.pod_group, wr.pod_group_replica_key))
    name = pod.metadata.labels.get(POD_GROUP_LABEL)
    if name:
        refs.append(GroupRef(GangApi.COSCHEDULING, ns, name))
    return refs


@dataclass(frozen=True, slots=True)
class GangPolicy:
    """What a group demands of the scheduler, whichever API it came from."""

    # All-or-nothing with this quorum; ``gang=False`` is the Basic policy (members
    # are scheduled one by one, with no quorum).
    gang: bool
    min_count: int
    # scheduler-plugins ``minResources``: the cluster must have this much free for
    # the group (requests in troupe's integer units: cpu millicores, bytes, counts).
    min_resources: dict[str, int] = field(default_factory=dict)
    # How long a group may stay partially placed or waiting before what it holds is
    # released (``scheduleTimeoutSeconds``; None: the profile's default).
    timeout_seconds: float | None = None
    # Group priority when the API sets one (PriorityClass or spec.priority); None:
    # the lowest member priority (KEP-4671 "weakest link").
    priority: int | None = None
    # When the group object was created (epoch seconds): QueueSort order (KEP-3370).
    created: float = 0.0
    # v1beta1 (Kubernetes 1.37), read and kept for the features that act on them:
    # ``disruptionMode: {all: {}}`` (the group is disrupted only as a whole, KEP-5710),
    # the group's ``preemptionPolicy``, and its topology keys (KEP-5732).
    disrupt_all: bool = False
    preemption_policy: str | None = None
    # Which topology domains the members must (and would rather) share.
    topology: TopologyLevels = field(default_factory=TopologyLevels)
    # A CompositePodGroup's tree (KEP-6012): the leaves whose pods the group holds and
    # each level's quorum; ``min_count`` is then the fewest pods that satisfy it.
    tree: GroupNode | None = None


@dataclass(frozen=True, slots=True)
class GroupProblem:
    """A user error in a group or its pods, reported on the objects involved and
    never blocking anything else: ``field`` is the offending path."""

    ref: GroupRef
    field: str
    message: str
    # The version of the object the problem is in, when it is not ``ref.api``'s own
    # (a v1beta1 PodGroup).
    api_version: str = ""
    # The group condition's reason: the input cannot be scheduled as declared
    # (``Unschedulable``), or its members break a rule upstream's pod-group cycle fails
    # with an error (``SchedulerError``: members' priority or scheduler name differ).
    # (``Invalid``: a CompositePodGroup tree whose layout is wrong, KEP-6012.)
    outcome: str = "Unschedulable"
    # The group waits for another object to appear (a parent CompositePodGroup): told
    # like a missing group object, after the gate's grace period.
    waiting: bool = False

    def __str__(self) -> str:
        version = self.api_version or self.ref.api.value
        return f"{version} {self.ref.object_key}: {self.field}: {self.message}"


class GroupDirectory(Protocol):
    """What the scheduler knows about groups (kept current by the informers)."""

    def policy(self, ref: GroupRef) -> GangPolicy | None:
        """The group's policy; None while its API object does not exist."""
        ...

    def problem(self, ref: GroupRef) -> GroupProblem | None:
        """Why the group cannot be scheduled as declared (a bad field), if so."""
        ...

    def placed_count(self, key: GroupKey) -> int:
        """Members bound or assumed (KEP-3370 Permit: assigned + assumed)."""
        ...

    def placed_members(self, key: GroupKey) -> set[PodKey]:
        """Keys of the members bound or assumed."""
        ...


class NoGroups:
    """A directory that knows no groups (profiles without gang support, tests)."""

    def policy(self, ref: GroupRef) -> GangPolicy | None:
        return None

    def problem(self, ref: GroupRef) -> GroupProblem | None:
        return None

    def placed_count(self, key: GroupKey) -> int:
        return 0

    def placed_members(self, key: GroupKey) -> set[PodKey]:
        return set()
