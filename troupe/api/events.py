"""Cluster events and queueing hints (upstream ``framework.ClusterEvent``/``QueueingHint``).

Plugins declare, through ``EnqueueExtensions.events_to_register``, which cluster
events could make a pod they rejected schedulable, with an optional hint function
that looks at the change and answers QUEUE or SKIP. The queue (``troupe.queue``)
calls them when the informers report an event.

``Resource`` names what changed with upstream's ``EventResource`` strings. Objects a
plugin watches (``troupe.api.watches``) are reported under their ``ObjectKind``'s
``event_resource``: one of the members below for the kinds upstream names (volumes,
dynamic resource allocation), ``"<resource>.<version>[.<group>]"`` for any other, so
``ClusterEvent.resource`` is a string and a ``Resource`` member is one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, Flag, StrEnum, auto

from troupe.api.objects import Pod


class Resource(StrEnum):
    NODE = "Node"
    POD = "Pod"  # an unscheduled pod (in the queue)
    ASSIGNED_POD = "AssignedPod"  # a pod bound (or assumed) to a node
    POD_GROUP = "PodGroup"
    PRIORITY_CLASS = "PriorityClass"
    # Not an upstream EventResource: kube-scheduler does not requeue on namespace
    # changes; troupe does, for InterPodAffinity's namespaceSelector.
    NAMESPACE = "Namespace"
    # The objects the volume and device plugins watch (upstream EventResource names).
    PERSISTENT_VOLUME = "PersistentVolume"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    STORAGE_CLASS = "StorageClass"
    CSI_NODE = "CSINode"
    CSI_DRIVER = "CSIDriver"
    CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
    VOLUME_ATTACHMENT = "VolumeAttachment"
    RESOURCE_CLAIM = "ResourceClaim"
    RESOURCE_SLICE = "ResourceSlice"
    DEVICE_CLASS = "DeviceClass"
    # Not an upstream EventResource (its DynamicResources plugin waits for the claim
    # made from a template instead); troupe reports template changes like the others.
    RESOURCE_CLAIM_TEMPLATE = "ResourceClaimTemplate"
    WILDCARD = "*"


class Action(Flag):
    ADD = auto()
    DELETE = auto()
    UPDATE_NODE_ALLOCATABLE = auto()
    UPDATE_NODE_LABEL = auto()
    UPDATE_NODE_TAINT = auto()
    UPDATE_NODE_CONDITION = auto()  # includes spec.unschedulable
    UPDATE_POD_LABEL = auto()
    UPDATE_POD_SCALE_DOWN = auto()  # requests went down
    UPDATE_POD_TOLERATIONS = auto()
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = auto()
    UPDATE_NAMESPACE_LABEL = auto()
    UPDATE_OTHER = auto()
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATIONS
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
        | UPDATE_NAMESPACE_LABEL
        | UPDATE_OTHER
    )
    ALL = ADD | DELETE | UPDATE


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    # A ``Resource`` member, or the event resource of another watched kind.
    resource: Resource | str
    action: Action
    label: str = ""

    def matches(self, incoming: ClusterEvent) -> bool:
        """True when a registration for ``self`` covers the ``incoming`` event."""
        if self.resource is not Resource.WILDCARD and self.resource != incoming.resource:
            return False
        return bool(self.action & incoming.action)

    def __str__(self) -> str:
        return self.label or f"{self.resource}{self.action.name}"


class QueueingHint(Enum):
    SKIP = 0
    QUEUE = 1


QueueingHintFn = Callable[[Pod, object | None, object | None], QueueingHint]
"""(pod that was rejected, old object, new object) -> hint."""


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None  # None: always QUEUE


# Events the scheduler itself reports; plugins register against these.
NODE_ADD = ClusterEvent(Resource.NODE, Action.ADD, "NodeAdd")
NODE_DELETE = ClusterEvent(Resource.NODE, Action.DELETE, "NodeDelete")
ASSIGNED_POD_ADD = ClusterEvent(Resource.ASSIGNED_POD, Action.ADD, "AssignedPodAdd")
ASSIGNED_POD_DELETE = ClusterEvent(Resource.ASSIGNED_POD, Action.DELETE, "AssignedPodDelete")
NAMESPACE_ADD = ClusterEvent(Resource.NAMESPACE, Action.ADD, "NamespaceAdd")
NAMESPACE_LABEL_UPDATE = ClusterEvent(
    Resource.NAMESPACE, Action.UPDATE_NAMESPACE_LABEL, "NamespaceUpdate"
)
NAMESPACE_DELETE = ClusterEvent(Resource.NAMESPACE, Action.DELETE, "NamespaceDelete")
UNSCHEDULABLE_TIMEOUT = ClusterEvent(Resource.WILDCARD, Action.ALL, "UnschedulableTimeout")
FORCE_ACTIVATE = ClusterEvent(Resource.WILDCARD, Action.ALL, "ForceActivate")
