"""The embedded cluster: a Kubernetes-compatible API server on loopback, simulated nodes
and kubelets (``SimCluster``), and the CRDs it can install."""

from troupe.sim.apiserver import ApiError, ApiServer, Store
from troupe.sim.cluster import SimCluster
from troupe.sim.crds import POD_GROUP_CRD
from troupe.sim.kubelet import RUN_SECONDS_ANNOTATION
from troupe.sim.nodespec import NodeSpec

__all__ = [
    "POD_GROUP_CRD",
    "RUN_SECONDS_ANNOTATION",
    "ApiError",
    "ApiServer",
    "NodeSpec",
    "SimCluster",
    "Store",
]
