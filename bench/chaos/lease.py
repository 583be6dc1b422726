"""The Lease in a chaos run: who held it between which writes, what the replicas said
when they stopped writing, and the edits the Lease faults make.

- ``LeaseTimeline``: a store listener started with the server's write ledger. At every
  change of the Lease it notes how many writes the ledger had accepted so far and who
  *validly* held the Lease from then on: its ``holderIdentity`` if
  ``leaseDurationSeconds`` is a positive integer, else nobody (a Lease of duration 0
  is expired for everyone, and one troupe cannot read is nobody's). Both are taken
  synchronously at the commit, so "write i was accepted after change c" is exact: no
  clock is compared.
- ``Closure``: what a replica's log said when its write fence closed (troupe.kube.fence):
  the moment on the host's monotonic clock (the server's ledger uses the same clock)
  and the writes it had let through and not seen answered then.
- ``delete``, ``steal``, ``zero_duration``: the Lease edits of the ``lease_deleted``,
  ``lease_stolen`` and ``lease_zero_duration`` faults, made in the store as a person
  with ``kubectl`` would make them through the API.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from troupe.sim.apiserver.harness.ledger import WriteLedger
from troupe.sim.apiserver.storage.store import Obj, Store

LEASES = "leases.coordination.k8s.io"


def valid_holder(lease: Obj | None) -> str:
    """Who holds ``lease`` for everyone: its holder if its duration is a positive
    integer, else nobody ("")."""
    spec = (lease or {}).get("spec")
    if not isinstance(spec, dict):
        return ""
    holder, duration = spec.get("holderIdentity"), spec.get("leaseDurationSeconds")
    if not isinstance(holder, str) or isinstance(duration, bool) or not isinstance(duration, int):
        return ""
    return holder if duration > 0 else ""


class LeaseTimeline:
    def __init__(self, store: Store, ledger: WriteLedger) -> None:
        self.namespace, self.name = ledger.lease_namespace, ledger.lease_name
        self._ledger = ledger
        current = store.find(store.resolve(LEASES), self.namespace, self.name)
        self.accepted_before: list[int] = [len(ledger.writes)]
        self.holders: list[str] = [valid_holder(current)]
        self.stop = store.listen(LEASES, self._on)

    def _on(self, type_: str, obj: Obj) -> None:
        meta = obj["metadata"]
        if (meta.get("namespace"), meta.get("name")) != (self.namespace, self.name):
            return
        self.accepted_before.append(len(self._ledger.writes))
        self.holders.append("" if type_ == "DELETED" else valid_holder(obj))

    def holder_of(self, index: int) -> str:
        """Who validly held the Lease when write ``index`` of the ledger was accepted."""
        return self.holders[max(0, bisect.bisect_right(self.accepted_before, index) - 1)]

    @property
    def changes(self) -> int:
        return len(self.holders) - 1


@dataclass(frozen=True, slots=True)
class Closure:
    """A replica's write fence closing, as its log line says."""

    reason: str
    at: float  # monotonic
    on_the_wire: tuple[str, ...]  # "METHOD path"

    @classmethod
    def of(cls, entry: dict[str, Any]) -> Closure | None:
        """The closure a log line reports (it names ``writesOnTheWire``), or None."""
        wire, at = entry.get("writesOnTheWire"), entry.get("monotonicTime")
        if not isinstance(wire, list) or not isinstance(at, int | float):
            return None
        return cls(str(entry.get("msg", "")), float(at), tuple(str(w) for w in wire))


# --- the edits of the Lease faults -------------------------------------------------------


def delete(store: Store, namespace: str, name: str) -> str:
    store.delete(LEASES, name, namespace)
    return "deleted the Lease"


def steal(store: Store, namespace: str, name: str, to: str) -> str:
    lease = store.get(LEASES, name, namespace)
    lease["spec"]["holderIdentity"] = to
    store.update(LEASES, lease)
    return f"set holderIdentity to {to}"


def zero_duration(store: Store, namespace: str, name: str) -> str:
    lease = store.get(LEASES, name, namespace)
    lease["spec"]["leaseDurationSeconds"] = 0
    store.update(LEASES, lease)
    return "set leaseDurationSeconds to 0"
