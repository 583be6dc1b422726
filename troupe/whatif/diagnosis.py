"""The scheduler's diagnosis of a failed attempt, as the what-if engine and
``troupe explain`` read it.

The scheduler records a JSON-shaped dict per failed attempt
(``troupe.scheduler.observe.explain``) and serves it on ``/debug/troupe/explain``;
``troupe explain --offline`` reads the same dict from the daemon it runs. This module
is the only reader of that dict: ``parse_diagnosis`` turns it into the frozen values
below, which the fit check, the fixes and the text output use, and keeps the dict as
it came for ``-o json`` (``Diagnosis.to_json``). Missing fields read as empty, as a
lone pod's record has no quorum, topology or preemption.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

Record = Mapping[str, Any]
# KEP-3370: the reason of a member that fits but whose gang does not.
WAITS_FOR_QUORUM: Final = "CoschedulingNotMeetMinMember"


class Rejection(NamedTuple):
    """An extension point and plugin that rejected a member, on how many nodes."""

    extension_point: str
    plugin: str
    nodes: int


@dataclass(frozen=True, slots=True)
class Member:
    """One member's (or a lone pod's) part of a diagnosis."""

    pod: str
    reason: str
    code: str = ""
    message: str = ""
    nodes: int = 0
    rejections: tuple[Rejection, ...] = ()
    # FitError reason -> nodes, most first.
    reasons: Mapping[str, int] = field(default_factory=dict)
    pre_filter: str = ""
    post_filter: str = ""
    requests: Mapping[str, int] = field(default_factory=dict)
    fits_on: str = ""  # where a member that fits would go

    @property
    def waits_for_quorum(self) -> bool:
        """It fits; its gang does not (not a rejection of the member itself)."""
        return self.reason == WAITS_FOR_QUORUM


@dataclass(frozen=True, slots=True)
class Quorum:
    min_count: int
    min_count_field: str
    already_placed: int
    fit: int  # placed before plus placed in this attempt (in the best domain)
    pending: int


@dataclass(frozen=True, slots=True)
class Preemption:
    """What gang preemption did: ``result`` ("preempted", "never", "rejected", ...)."""

    result: str
    message: str
    victims: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Diagnosis:
    message: str
    members: tuple[Member, ...]
    time: float | None = None  # when the attempt failed (seconds since the epoch)
    quorum: Quorum | None = None  # a gang's; None for a lone pod
    min_resources_shortfall: str = ""
    required_level: str = ""  # the gang's required topology level
    preemption: Preemption | None = None
    nominated_node: str = ""
    record: Record = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The diagnosis as the scheduler recorded it (``-o json``)."""
        return dict(self.record)


def parse_diagnosis(record: Record) -> Diagnosis:
    """The diagnosis in ``record`` (a pod's or a group's, as the debug endpoint and
    ``SchedulerDaemon.explain`` give it)."""
    record = {k: v for k, v in record.items() if k != "found"}
    quorum = record.get("quorum")
    preemption = record.get("preemption")
    when = record.get("time")
    return Diagnosis(
        message=str(record.get("message") or ""),
        members=tuple(_member(m) for m in record.get("members") or ()),
        time=float(when) if when is not None else None,
        quorum=_quorum(quorum, record.get("members") or ()) if quorum else None,
        min_resources_shortfall=str(record.get("minResourcesShortfall") or ""),
        required_level=str((record.get("topology") or {}).get("required") or ""),
        preemption=_preemption(preemption) if preemption else None,
        nominated_node=str(record.get("nominatedNodeName") or ""),
        record=record,
    )


def _member(m: Record) -> Member:
    return Member(
        pod=str(m.get("pod") or ""),
        reason=str(m.get("reason") or ""),
        code=str(m.get("code") or ""),
        message=str(m.get("message") or ""),
        nodes=int(m.get("nodes") or 0),
        rejections=tuple(
            Rejection(str(r["extensionPoint"]), str(r["plugin"]), int(r["nodes"]))
            for r in m.get("rejections") or ()
        ),
        reasons={str(k): int(v) for k, v in (m.get("reasons") or {}).items()},
        pre_filter=str(m.get("preFilter") or ""),
        post_filter=str(m.get("postFilter") or ""),
        requests={str(k): int(v) for k, v in (m.get("requests") or {}).items()},
        fits_on=str(m.get("fitsOn") or ""),
    )


def _quorum(q: Record, members: Any) -> Quorum:
    already = int(q.get("alreadyPlaced") or 0)
    # A gang with a required topology level is judged per domain: the record's
    # members that fit are those of the best domain ("best rack r2: 4 of 8 pods fit"),
    # but its ``fit`` counts only what the cycle kept placed (none, after a failed
    # attempt). The members are what the headline counts, so the quorum reads them.
    waiting = sum(1 for m in members if (m or {}).get("reason") == WAITS_FOR_QUORUM)
    return Quorum(
        min_count=int(q["minCount"]),
        min_count_field=str(q.get("minCountField") or ""),
        already_placed=already,
        fit=max(int(q.get("fit") or 0), already + waiting),
        pending=int(q.get("pending") or 0),
    )


def _preemption(p: Record) -> Preemption:
    return Preemption(
        result=str(p.get("result") or ""),
        message=str(p.get("message") or ""),
        victims=tuple(str(v) for v in p.get("victims") or ()),
    )
