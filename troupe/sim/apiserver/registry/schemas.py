"""The Go types of the built-in kinds, for the fields ``decoding.check_types`` checks.

What the scheduler reads (and the simulated kubelets and leader election write) is
described with upstream's Go type names (k8s.io/api/core/v1, coordination/v1,
scheduling/v1, policy/v1, events/v1), and so is what the server itself reads back
(the table printers' columns, the disruption controller's ``disruptedPods``), so a
wrong JSON type is refused with the message a real server's decoder gives and nothing
stored can break a later read. Every other kind is checked for its object metadata
only (``metadata_only``). Used by the strategies of ``kinds.py``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

from troupe.sim.apiserver.registry.decoding import (
    BOOL,
    INT32,
    INT64,
    INT_OR_STRING,
    MICRO_TIME,
    RESOURCE_LIST,
    STRING,
    STRING_MAP,
    STRINGS,
    TIME,
    List,
    Map,
    Struct,
    object_type,
    string,
)

LABEL_SELECTOR: Final = Struct(
    "v1.LabelSelector",
    {
        "matchLabels": STRING_MAP,
        "matchExpressions": List(
            "[]v1.LabelSelectorRequirement",
            Struct(
                "v1.LabelSelectorRequirement",
                {"key": STRING, "operator": string("v1.LabelSelectorOperator"), "values": STRINGS},
            ),
        ),
    },
)
_NODE_SELECTOR_REQUIREMENTS: Final = List(
    "[]v1.NodeSelectorRequirement",
    Struct(
        "v1.NodeSelectorRequirement",
        {"key": STRING, "operator": string("v1.NodeSelectorOperator"), "values": STRINGS},
    ),
)
_NODE_SELECTOR_TERM: Final = Struct(
    "v1.NodeSelectorTerm",
    {"matchExpressions": _NODE_SELECTOR_REQUIREMENTS, "matchFields": _NODE_SELECTOR_REQUIREMENTS},
)
_NODE_AFFINITY: Final = Struct(
    "v1.NodeAffinity",
    {
        "requiredDuringSchedulingIgnoredDuringExecution": Struct(
            "v1.NodeSelector",
            {"nodeSelectorTerms": List("[]v1.NodeSelectorTerm", _NODE_SELECTOR_TERM)},
        ),
        "preferredDuringSchedulingIgnoredDuringExecution": List(
            "[]v1.PreferredSchedulingTerm",
            Struct(
                "v1.PreferredSchedulingTerm", {"weight": INT32, "preference": _NODE_SELECTOR_TERM}
            ),
        ),
    },
)
_POD_AFFINITY_TERM: Final = Struct(
    "v1.PodAffinityTerm",
    {
        "labelSelector": LABEL_SELECTOR,
        "namespaces": STRINGS,
        "namespaceSelector": LABEL_SELECTOR,
        "topologyKey": STRING,
        "matchLabelKeys": STRINGS,
        "mismatchLabelKeys": STRINGS,
    },
)


def _pod_affinity(go: str) -> Struct:
    return Struct(
        go,
        {
            "requiredDuringSchedulingIgnoredDuringExecution": List(
                "[]v1.PodAffinityTerm", _POD_AFFINITY_TERM
            ),
            "preferredDuringSchedulingIgnoredDuringExecution": List(
                "[]v1.WeightedPodAffinityTerm",
                Struct(
                    "v1.WeightedPodAffinityTerm",
                    {"weight": INT32, "podAffinityTerm": _POD_AFFINITY_TERM},
                ),
            ),
        },
    )


_CONTAINER: Final = Struct(
    "v1.Container",
    {
        "name": STRING,
        "image": STRING,
        "imagePullPolicy": string("v1.PullPolicy"),
        "command": STRINGS,
        "args": STRINGS,
        "resources": Struct(
            "v1.ResourceRequirements", {"requests": RESOURCE_LIST, "limits": RESOURCE_LIST}
        ),
        "ports": List(
            "[]v1.ContainerPort",
            Struct(
                "v1.ContainerPort",
                {
                    "name": STRING,
                    "containerPort": INT32,
                    "hostPort": INT32,
                    "hostIP": STRING,
                    "protocol": string("v1.Protocol"),
                },
            ),
        ),
        "restartPolicy": string("v1.ContainerRestartPolicy"),
    },
)
_TOLERATION: Final = Struct(
    "v1.Toleration",
    {
        "key": STRING,
        "operator": string("v1.TolerationOperator"),
        "value": STRING,
        "effect": string("v1.TaintEffect"),
        "tolerationSeconds": INT64,
    },
)
_TOPOLOGY_SPREAD: Final = Struct(
    "v1.TopologySpreadConstraint",
    {
        "maxSkew": INT32,
        "topologyKey": STRING,
        "whenUnsatisfiable": string("v1.UnsatisfiableConstraintAction"),
        "labelSelector": LABEL_SELECTOR,
        "minDomains": INT32,
        "nodeAffinityPolicy": string("v1.NodeInclusionPolicy"),
        "nodeTaintsPolicy": string("v1.NodeInclusionPolicy"),
        "matchLabelKeys": STRINGS,
    },
)
_POD_SPEC: Final = Struct(
    "v1.PodSpec",
    {
        "nodeName": STRING,
        "schedulerName": STRING,
        "priority": INT32,
        "priorityClassName": STRING,
        "preemptionPolicy": string("v1.PreemptionPolicy"),
        "restartPolicy": string("v1.RestartPolicy"),
        "serviceAccountName": STRING,
        "hostNetwork": BOOL,
        "terminationGracePeriodSeconds": INT64,
        "activeDeadlineSeconds": INT64,
        "containers": List("[]v1.Container", _CONTAINER),
        "initContainers": List("[]v1.Container", _CONTAINER),
        "overhead": RESOURCE_LIST,
        "nodeSelector": STRING_MAP,
        "affinity": Struct(
            "v1.Affinity",
            {
                "nodeAffinity": _NODE_AFFINITY,
                "podAffinity": _pod_affinity("v1.PodAffinity"),
                "podAntiAffinity": _pod_affinity("v1.PodAntiAffinity"),
            },
        ),
        "tolerations": List("[]v1.Toleration", _TOLERATION),
        "schedulingGates": List(
            "[]v1.PodSchedulingGate", Struct("v1.PodSchedulingGate", {"name": STRING})
        ),
        "topologySpreadConstraints": List("[]v1.TopologySpreadConstraint", _TOPOLOGY_SPREAD),
        "readinessGates": List(
            "[]v1.PodReadinessGate",
            Struct("v1.PodReadinessGate", {"conditionType": string("v1.PodConditionType")}),
        ),
    },
)
_CONTAINER_STATUSES: Final = List(
    "[]v1.ContainerStatus",
    Struct(
        "v1.ContainerStatus",
        {
            "name": STRING,
            "ready": BOOL,
            "started": BOOL,
            "restartCount": INT32,
            "image": STRING,
            "imageID": STRING,
            "containerID": STRING,
            "state": Struct(
                "v1.ContainerState",
                {
                    "waiting": Struct("v1.ContainerStateWaiting", {"reason": STRING}),
                    "running": Struct("v1.ContainerStateRunning", {"startedAt": TIME}),
                    "terminated": Struct(
                        "v1.ContainerStateTerminated",
                        {"exitCode": INT32, "reason": STRING, "finishedAt": TIME},
                    ),
                },
            ),
        },
    ),
)
_POD_STATUS: Final = Struct(
    "v1.PodStatus",
    {
        "phase": string("v1.PodPhase"),
        "nominatedNodeName": STRING,
        "podIP": STRING,
        "hostIP": STRING,
        "reason": STRING,
        "startTime": TIME,
        "containerStatuses": _CONTAINER_STATUSES,
        "initContainerStatuses": _CONTAINER_STATUSES,
        "conditions": List(
            "[]v1.PodCondition",
            Struct(
                "v1.PodCondition",
                {
                    "type": string("v1.PodConditionType"),
                    "status": string("v1.ConditionStatus"),
                    "reason": STRING,
                    "message": STRING,
                    "lastTransitionTime": TIME,
                    "lastProbeTime": TIME,
                },
            ),
        ),
    },
)
POD: Final = object_type("Pod", spec=_POD_SPEC, status=_POD_STATUS)

NODE: Final = object_type(
    "Node",
    spec=Struct(
        "v1.NodeSpec",
        {
            "unschedulable": BOOL,
            "taints": List(
                "[]v1.Taint",
                Struct(
                    "v1.Taint",
                    {"key": STRING, "value": STRING, "effect": string("v1.TaintEffect")},
                ),
            ),
        },
    ),
    status=Struct(
        "v1.NodeStatus",
        {
            "capacity": RESOURCE_LIST,
            "allocatable": RESOURCE_LIST,
            "conditions": List(
                "[]v1.NodeCondition",
                Struct(
                    "v1.NodeCondition",
                    {
                        "type": string("v1.NodeConditionType"),
                        "status": string("v1.ConditionStatus"),
                        "lastHeartbeatTime": TIME,
                        "lastTransitionTime": TIME,
                    },
                ),
            ),
            "addresses": List(
                "[]v1.NodeAddress",
                Struct("v1.NodeAddress", {"type": string("v1.NodeAddressType"), "address": STRING}),
            ),
            "nodeInfo": Struct(
                "v1.NodeSystemInfo",
                {
                    "kubeletVersion": STRING,
                    "osImage": STRING,
                    "kernelVersion": STRING,
                    "containerRuntimeVersion": STRING,
                },
            ),
        },
    ),
)

LEASE: Final = object_type(
    "Lease",
    spec=Struct(
        "v1.LeaseSpec",
        {
            "holderIdentity": STRING,
            "leaseDurationSeconds": INT32,
            "acquireTime": MICRO_TIME,
            "renewTime": MICRO_TIME,
            "leaseTransitions": INT32,
            "strategy": string("v1.CoordinatedLeaseStrategy"),
            "preferredHolder": STRING,
        },
    ),
)

BINDING: Final = object_type(
    "Binding",
    target=Struct(
        "v1.ObjectReference",
        {
            "kind": STRING,
            "namespace": STRING,
            "name": STRING,
            "uid": string("types.UID"),
            "apiVersion": STRING,
            "resourceVersion": STRING,
            "fieldPath": STRING,
        },
    ),
)

DELETE_OPTIONS: Final = Struct(
    "v1.DeleteOptions",
    {
        "apiVersion": STRING,
        "kind": STRING,
        "gracePeriodSeconds": INT64,
        "preconditions": Struct(
            "v1.Preconditions", {"uid": string("types.UID"), "resourceVersion": STRING}
        ),
        "orphanDependents": BOOL,
        "propagationPolicy": string("v1.DeletionPropagation"),
        "dryRun": STRINGS,
    },
)

EVICTION: Final = object_type("Eviction", deleteOptions=DELETE_OPTIONS)

PRIORITY_CLASS: Final = Struct(
    "v1.PriorityClass",
    {
        **object_type("PriorityClass").fields,
        "value": INT32,
        "globalDefault": BOOL,
        "description": STRING,
        "preemptionPolicy": string("v1.PreemptionPolicy"),
    },
)

POD_DISRUPTION_BUDGET: Final = object_type(
    "PodDisruptionBudget",
    spec=Struct(
        "v1.PodDisruptionBudgetSpec",
        {
            "selector": LABEL_SELECTOR,
            "minAvailable": INT_OR_STRING,
            "maxUnavailable": INT_OR_STRING,
        },
    ),
    status=Struct(
        "v1.PodDisruptionBudgetStatus",
        {
            "disruptedPods": Map("map[string]v1.Time", TIME),
            "disruptionsAllowed": INT32,
            "currentHealthy": INT32,
            "desiredHealthy": INT32,
            "expectedPods": INT32,
        },
    ),
)

_OBJECT_REFERENCE: Final = Struct(
    "v1.ObjectReference",
    {
        "kind": STRING,
        "namespace": STRING,
        "name": STRING,
        "uid": string("types.UID"),
        "apiVersion": STRING,
        "resourceVersion": STRING,
        "fieldPath": STRING,
    },
)
_EVENT_SERIES: Final = Struct("v1.EventSeries", {"count": INT32, "lastObservedTime": MICRO_TIME})
CORE_EVENT: Final = object_type(
    "Event",
    involvedObject=_OBJECT_REFERENCE,
    reason=STRING,
    message=STRING,
    type=STRING,
    count=INT32,
    firstTimestamp=TIME,
    lastTimestamp=TIME,
    eventTime=MICRO_TIME,
    series=_EVENT_SERIES,
    source=Struct("v1.EventSource", {"component": STRING, "host": STRING}),
    reportingComponent=STRING,
    reportingInstance=STRING,
    action=STRING,
)
EVENTS_V1_EVENT: Final = object_type(
    "Event",
    regarding=_OBJECT_REFERENCE,
    related=_OBJECT_REFERENCE,
    reason=STRING,
    note=STRING,
    type=STRING,
    action=STRING,
    eventTime=MICRO_TIME,
    series=_EVENT_SERIES,
    reportingController=STRING,
    reportingInstance=STRING,
    deprecatedCount=INT32,
    deprecatedFirstTimestamp=TIME,
    deprecatedLastTimestamp=TIME,
    deprecatedSource=Struct("v1.EventSource", {"component": STRING, "host": STRING}),
)


@lru_cache(maxsize=512)
def metadata_only(kind: str) -> Struct:
    """The type of a kind whose fields beyond ``metadata`` are not modelled."""
    return object_type(kind)
