"""The Lease record leader election reads and writes, read without ever raising.

``read_record`` turns a Lease's ``spec``, as the API server sent it (any JSON), into a
``LeaderRecord``. A field of the wrong type or out of the int32 range (a real API
server refuses such a Lease; a server that does not validate may store one) gives a
record whose ``problem`` names the field: the elector (``troupe.kube.leader``) treats
such a Lease as held by another replica, and a leader that sees its Lease become one
stops writing. Nothing here raises on what a Lease contains.

``Lease`` is the model the Lease watch parses (``KubeClient.watch_lease``): identity
metadata only, and the spec kept as sent, for ``read_record``. ``is_newer`` compares
two resourceVersions as upstream's ``CompareResourceVersion`` does (KEP-5504).

Follows client-go ``tools/leaderelection/resourcelock`` (``LeaseSpecToLeaderElectionRecord``)
and apimachinery ``pkg/util/resourceversion``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final

from pydantic import BeforeValidator, Field

from troupe.api.objects import KubeObject, ObjectMeta, kube_model

INT32_MAX: Final = 2**31 - 1
_RESOURCE_VERSION: Final = re.compile(r"[1-9][0-9]*")


@dataclass(frozen=True, slots=True)
class LeaderRecord:
    """The Lease spec fields leader election reads and writes. ``problem`` is set (and
    names the field) when the spec could not be read; ``raw`` is then the spec as
    sent, so a change to it is still seen as a change."""

    holder: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    transitions: int = 0
    problem: str = ""
    raw: str = ""

    def held_by_another(self, identity: str) -> bool:
        """Whether the record names a holder other than ``identity``; an unreadable
        record counts as held by another replica."""
        return bool(self.problem) or (self.holder != "" and self.holder != identity)

    def spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time or None,
            "renewTime": self.renew_time or None,
            "leaseTransitions": self.transitions,
        }


class _Unreadable(Exception):
    pass


def _string(spec: Mapping[str, Any], key: str) -> str:
    value = spec.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Unreadable(f"spec.{key}: expected a string, got {json.dumps(value)[:80]}")
    return value


def _int32(spec: Mapping[str, Any], key: str) -> int:
    value = spec.get(key)
    if value is None:
        return 0
    # JSON true is not a number; 15.0 is not an integer (Go refuses both for an int32).
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Unreadable(f"spec.{key}: expected an integer, got {json.dumps(value)[:80]}")
    if not -INT32_MAX - 1 <= value <= INT32_MAX:
        raise _Unreadable(f"spec.{key}: {value} is out of the int32 range")
    return value


def read_record(spec: object) -> LeaderRecord:
    """The record in a Lease's ``spec`` (absent fields read as empty, as client-go's
    nil pointers do); never raises."""
    if spec is None:
        return LeaderRecord()
    try:
        if not isinstance(spec, Mapping):
            raise _Unreadable(f"spec: expected an object, got {type(spec).__name__}")
        return LeaderRecord(
            holder=_string(spec, "holderIdentity"),
            lease_duration_seconds=_int32(spec, "leaseDurationSeconds"),
            acquire_time=_string(spec, "acquireTime"),
            renew_time=_string(spec, "renewTime"),
            transitions=_int32(spec, "leaseTransitions"),
        )
    except _Unreadable as problem:
        raw = json.dumps(spec, sort_keys=True, default=repr)
        return LeaderRecord(problem=str(problem), raw=raw)


def record_of(lease: Mapping[str, Any]) -> LeaderRecord:
    """The record of a whole Lease object (its ``spec``)."""
    return read_record(lease.get("spec"))


def resource_version(lease: Mapping[str, Any]) -> str:
    meta = lease.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return rv if isinstance(rv, str) else ""


def is_newer(rv: str, than: str) -> bool:
    """Whether resourceVersion ``rv`` comes after ``than`` (KEP-5504: both positive
    integers without leading zeros, compared as numbers). A version that cannot be
    compared counts as newer: an event we cannot order is judged, not dropped."""
    if not (_RESOURCE_VERSION.fullmatch(rv) and _RESOURCE_VERSION.fullmatch(than)):
        return rv != than or not rv
    return (len(rv), rv) > (len(than), than)


# --- the model the Lease watch parses ---------------------------------------------------

_IDENTITY_KEYS: Final = ("name", "namespace", "uid", "resourceVersion")


def _identity_only(meta: object) -> object:
    """Only the metadata the watch needs: a Lease whose labels or annotations do not
    parse is still read (its spec decides), not dropped as a deletion."""
    if isinstance(meta, Mapping):
        return {k: meta[k] for k in _IDENTITY_KEYS if isinstance(meta.get(k), str)}
    return meta


@kube_model
class Lease(KubeObject):
    """A ``coordination.k8s.io/v1`` Lease as the watch sees it."""

    metadata: Annotated[ObjectMeta, BeforeValidator(_identity_only)] = Field(
        default_factory=ObjectMeta
    )
    spec: Any = None

    def as_mapping(self) -> dict[str, Any]:
        """The shape ``LeaderElector`` reads: identity metadata and the spec as sent."""
        m = self.metadata
        return {
            "metadata": {
                "name": m.name,
                "namespace": m.namespace,
                "uid": m.uid,
                "resourceVersion": m.resource_version,
            },
            "spec": self.spec,
        }


# --- what a replica has seen of its Lease -----------------------------------------------


class LeaseSeen:
    """What this replica has seen of its Lease: the last object read or written (its
    resourceVersion is the precondition of our next write), the newest resourceVersion
    seen, the record, and when the record last changed on our monotonic clock
    (client-go's ``observedTime``)."""

    def __init__(self, namespace: str, name: str) -> None:
        self.namespace = namespace
        self.name = name
        self.lease: dict[str, Any] | None = None
        self.version = ""
        self.record = LeaderRecord()
        self.changed_at = float("-inf")

    def take(self, lease: dict[str, Any], now: float) -> bool:
        """Take in one version of the Lease; whether its record differs from the last."""
        self.lease = lease
        rv = resource_version(lease)
        if is_newer(rv, self.version):
            self.version = rv
        record = record_of(lease)
        if record == self.record:
            return False
        self.record, self.changed_at = record, now
        return True

    def gone(self, now: float) -> None:
        """The Lease does not exist (any more)."""
        self.lease = None
        self.record, self.changed_at = LeaderRecord(), now

    def holds(self, identity: str) -> bool:
        return not self.record.problem and self.record.holder == identity

    def valid(self, now: float, unreadable_duration: float) -> bool:
        """Whether the record holds at ``now``: ``observedTime + leaseDurationSeconds``
        in the future. An unreadable record is held by someone who never renews, for
        ``unreadable_duration``."""
        record = self.record
        duration = unreadable_duration if record.problem else record.lease_duration_seconds
        return self.changed_at + duration > now

    def body(self, record: LeaderRecord) -> dict[str, Any]:
        """The Lease to write: ``record`` over the version last seen."""
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        rv = resource_version(self.lease) if self.lease is not None else ""
        if rv:
            metadata["resourceVersion"] = rv
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": record.spec(),
        }
