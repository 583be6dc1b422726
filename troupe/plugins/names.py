"""Every plugin name, in one place (upstream ``framework/plugins/names``).

Plugin classes take their ``name`` from here, and the registry, the default profile
(``troupe.api.config.DEFAULT_MULTIPOINT``) and tests refer to plugins through these
constants, so a name is spelled once.
"""

from __future__ import annotations

from typing import Final

PRIORITY_SORT: Final = "PrioritySort"
SCHEDULING_GATES: Final = "SchedulingGates"
NODE_NAME: Final = "NodeName"
NODE_UNSCHEDULABLE: Final = "NodeUnschedulable"
NODE_RESOURCES_FIT: Final = "NodeResourcesFit"
NODE_RESOURCES_BALANCED_ALLOCATION: Final = "NodeResourcesBalancedAllocation"
TAINT_TOLERATION: Final = "TaintToleration"
NODE_AFFINITY: Final = "NodeAffinity"
NODE_PORTS: Final = "NodePorts"
POD_TOPOLOGY_SPREAD: Final = "PodTopologySpread"
INTER_POD_AFFINITY: Final = "InterPodAffinity"
DEFAULT_PREEMPTION: Final = "DefaultPreemption"
DEFAULT_BINDER: Final = "DefaultBinder"
# Gang plugins: the native one and the scheduler-plugins compatible Permit barrier.
GANG_SCHEDULING: Final = "GangScheduling"
COSCHEDULING: Final = "Coscheduling"
