"""CustomResourceDefinitions the embedded cluster can install, as Python data.

``POD_GROUP_CRD`` is the scheduler-plugins PodGroup (``scheduling.x-k8s.io/v1alpha1``,
kind PodGroup, plural podgroups, short name pg, namespaced, status subresource), with the
fields of its upstream schema: spec ``minMember``, ``minResources``,
``scheduleTimeoutSeconds``; status ``phase``, ``occupiedBy``, ``running``, ``succeeded``,
``failed``, ``scheduleStartTime``. ``SimCluster(install_crds=True)`` creates it at start.
"""

from __future__ import annotations

from typing import Any, Final

_QUANTITY: Final = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": (
        r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
        r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
    ),
    "x-kubernetes-int-or-string": True,
}

POD_GROUP_CRD: Final[dict[str, Any]] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {
        "name": "podgroups.scheduling.x-k8s.io",
        "annotations": {
            "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"
        },
    },
    "spec": {
        "group": "scheduling.x-k8s.io",
        "names": {
            "kind": "PodGroup",
            "listKind": "PodGroupList",
            "plural": "podgroups",
            "singular": "podgroup",
            "shortNames": ["pg", "pgs"],
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "description": "PodGroup is a collection of Pod; used for batch workload.",
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "minMember": {
                                        "type": "integer",
                                        "format": "int32",
                                        "minimum": 1,
                                    },
                                    "minResources": {
                                        "type": "object",
                                        "additionalProperties": _QUANTITY,
                                    },
                                    "scheduleTimeoutSeconds": {
                                        "type": "integer",
                                        "format": "int32",
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "phase": {"type": "string"},
                                    "occupiedBy": {"type": "string"},
                                    "running": {"type": "integer", "format": "int32"},
                                    "succeeded": {"type": "integer", "format": "int32"},
                                    "failed": {"type": "integer", "format": "int32"},
                                    "scheduleStartTime": {"type": "string", "format": "date-time"},
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}
