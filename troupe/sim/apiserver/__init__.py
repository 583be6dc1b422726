"""The embedded Kubernetes-compatible API server (``ApiServer``) and its in-memory store."""

from troupe.sim.apiserver.errors import ApiError
from troupe.sim.apiserver.resources import KindKey, ResourceType
from troupe.sim.apiserver.server import ApiServer
from troupe.sim.apiserver.store import Store
from troupe.sim.apiserver.subscription import Subscription

__all__ = ["ApiError", "ApiServer", "KindKey", "ResourceType", "Store", "Subscription"]
