"""Who wrote what, and who held the Lease meanwhile: the server's record of accepted writes.

``ApiServer.record_writes(namespace, name)`` starts a ``WriteLedger`` for one
``coordination.k8s.io`` Lease. From then on every write the server accepts (a request
other than GET/HEAD/OPTIONS answered 2xx) is recorded with the request's User-Agent
and the Lease's ``holderIdentity`` twice: when the request arrived (before any
injected delay) and when it was answered. Every accepted ``pods/binding`` is also
recorded with the pod's UID, the node, and whether a Node of that name existed at
that moment (upstream allows binding to a missing node).

Nothing in Kubernetes checks the Lease on a write (docs/operations.md, "Leader
election and fencing"); the ledger is how a harness holds replicas to it from the
server's side: ``bench chaos`` reads it at the end of a run. The records are taken in
the request handler (``ApiServer._handle``), between the store's commit and the
reply, with no await in between, so nothing else happens in the cluster meanwhile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from troupe.sim.apiserver.storage.store import Store

READS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_BINDING: Final = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")


@dataclass(frozen=True, slots=True)
class WriteRecord:
    """One accepted write: the Lease holder when it arrived and when it was answered."""

    at: float
    method: str
    path: str
    user_agent: str
    holder_at_arrival: str
    holder_at_commit: str


@dataclass(frozen=True, slots=True)
class BindingRecord:
    """One accepted ``pods/binding``: which pod (by UID) went to which node."""

    at: float
    namespace: str
    name: str
    uid: str
    node: str
    node_existed: bool
    user_agent: str


@dataclass
class WriteLedger:
    store: Store
    lease_namespace: str
    lease_name: str
    writes: list[WriteRecord] = field(default_factory=list)
    bindings: list[BindingRecord] = field(default_factory=list)

    def holder(self) -> str:
        """The Lease's ``holderIdentity`` now ("" when it is absent or released)."""
        rt = self.store.resolve("leases.coordination.k8s.io")
        lease = self.store.find(rt, self.lease_namespace, self.lease_name)
        spec = (lease or {}).get("spec") or {}
        return str(spec.get("holderIdentity") or "")

    def arrived(self, method: str) -> str | None:
        """The holder as a write arrives (None for a read, which is not recorded)."""
        return None if method in READS else self.holder()

    def accepted(self, method: str, path: str, user_agent: str, holder_at_arrival: str) -> None:
        """Record a write the server has just committed and is about to answer 2xx."""
        now = self.store.clock.now()
        self.writes.append(
            WriteRecord(now, method, path, user_agent, holder_at_arrival, self.holder())
        )
        match = _BINDING.match(path) if method == "POST" else None
        if match is None:
            return
        namespace, name = match.groups()
        pod = self.store.find(self.store.resolve("pods"), namespace, name)
        if pod is None:
            return
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        existed = self.store.find(self.store.resolve("nodes"), "", node) is not None
        self.bindings.append(
            BindingRecord(now, namespace, name, pod["metadata"]["uid"], node, existed, user_agent)
        )
