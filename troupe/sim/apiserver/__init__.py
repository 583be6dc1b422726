"""The embedded Kubernetes-compatible API server (``ApiServer``) and its in-memory store.

Layout, top to bottom (each layer imports only the ones below it; ``lint-imports``
keeps it so):

- ``server.py``: ``ApiServer``, the aiohttp application: parses the path, authenticates,
  applies injected faults and dispatches to the endpoints.
- ``endpoints/``: what answers HTTP: the verbs, watch streams, discovery, OpenAPI,
  Table printing, TokenReviews and SubjectAccessReviews, request decoding.
- ``harness/``: what tests and benchmarks use to disturb and watch the server: injected
  faults and the write ledger.
- ``registry/``: every served kind and its rules (``registry/kinds.py`` is the one
  table of built-in kinds and their strategies), the pod subresources (binding,
  eviction) and the store of a new cluster (``registry/bootstrap.py``).
- ``auth/``: who a request comes from (tokens) and what RBAC allows.
- ``controllers/``: what runs beside the store and keeps status current (PDBs).
- ``storage/``: the object store, watch history and fan-out, paging, version
  conversion, and the ``Strategy`` hooks every write goes through.
- ``machinery/``: what every layer shares, as k8s.io/apimachinery: ``ResourceType`` and
  the served-type index, Status errors, metadata helpers, selectors, patches, JSON.

docs/embedded-cluster.md describes what the server does and where it differs from
kube-apiserver.
"""

from troupe.sim.apiserver.machinery.errors import ApiError
from troupe.sim.apiserver.machinery.resources import KindKey, ResourceType
from troupe.sim.apiserver.server import ApiServer
from troupe.sim.apiserver.storage.store import Store
from troupe.sim.apiserver.storage.subscription import Subscription

__all__ = ["ApiError", "ApiServer", "KindKey", "ResourceType", "Store", "Subscription"]
