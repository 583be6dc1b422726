"""troupe's Kubernetes client layer: the only code that imports kubernetes_asyncio
or aiohttp (an import contract holds the rest of troupe to it).

- ``connect`` / ``check_reachable``: credentials and reachability (``connection``);
- ``KubeClient``: the ``SchedulerClient`` writes — bind, status patch, events — plus
  delete, eviction and custom-object helpers (``client``, ``events``);
- ``Informer`` / ``SharedInformers``: list + watch into stores and the scheduler's
  handlers (``informer``, ``shared``); the informers the daemon adds to them:
  PodDisruptionBudgets (``pdb_informer``), namespace labels
  (``namespace_informer``), the gang kinds (``gang_informers``);
- ``TokenBucket``, ``RetryPolicy``: the write limiter and retry bounds;
- the HTTP/1.1 connection pool for hot requests (``http1``, ``http1_pools``);
- leader election on a Lease (``leader``) and the scheduler's own HTTP endpoints,
  ``/metrics`` and the probes (``health``).

See docs/events.md for how events are aggregated.
"""

from troupe.kube.client import KubeClient, custom_object_path, pod_path
from troupe.kube.connection import check_reachable, connect, kubeconfig_paths
from troupe.kube.errors import KubeConnectionError, ResponseError, to_api_error
from troupe.kube.events import EventPolicy, EventRecorder, micro_time
from troupe.kube.informer import Informer, InformerConfig, object_key
from troupe.kube.namespace_informer import NamespaceHandlers
from troupe.kube.ratelimit import KeyedBuckets, TokenBucket
from troupe.kube.retry import RetryPolicy, with_retries
from troupe.kube.shared import ClusterHandlers, SharedInformers
from troupe.kube.transport import HttpTransport, Response, Timeouts, Transport

__all__ = [
    "ClusterHandlers",
    "EventPolicy",
    "EventRecorder",
    "HttpTransport",
    "Informer",
    "InformerConfig",
    "KeyedBuckets",
    "KubeClient",
    "KubeConnectionError",
    "NamespaceHandlers",
    "Response",
    "ResponseError",
    "RetryPolicy",
    "SharedInformers",
    "Timeouts",
    "TokenBucket",
    "Transport",
    "check_reachable",
    "connect",
    "custom_object_path",
    "kubeconfig_paths",
    "micro_time",
    "object_key",
    "pod_path",
    "to_api_error",
    "with_retries",
]
