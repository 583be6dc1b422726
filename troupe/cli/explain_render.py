"""``troupe explain``'s report and its output: ``ExplainReport.to_json`` for ``-o json``,
``render`` for text (the diagnosis, the quorum, the members, the capacity per domain
and node, preemption and the checked fixes). Called by ``troupe.cli.explain``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from troupe.whatif.diagnosis import Diagnosis, Member
from troupe.whatif.fit import fmt_vector
from troupe.whatif.state import Target


@dataclass
class ExplainReport:
    target: Target
    source: str  # "scheduler" or "offline"
    diagnosis: Diagnosis | None = None
    would_bind: dict[str, str] | None = None  # offline, bound: pod -> node
    capacity: dict[str, Any] | None = None
    fixes: list[dict[str, Any]] | None = None  # None: not looked for

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "target": {"kind": self.target.kind, "name": self.target.display},
            "source": self.source,
            "diagnosis": self.diagnosis.to_json() if self.diagnosis is not None else None,
        }
        if self.would_bind is not None:
            out["wouldBind"] = self.would_bind
        if self.capacity is not None:
            out["capacity"] = self.capacity
        if self.fixes is not None:
            out["fixes"] = self.fixes
        return out


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    return [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip()
        for row in [header, *rows]
    ]


def _rejections(member: Member) -> str:
    if member.waits_for_quorum:
        where = member.fits_on
        return f"fits (on {where}); waits for the quorum" if where else "fits; waits for the quorum"
    parts = [f"{r.extension_point}/{r.plugin}: {r.nodes} node(s)" for r in member.rejections]
    if member.pre_filter:
        parts.append(f"PreFilter: {member.pre_filter}")
    return "; ".join(parts) or member.message or member.code or "-"


def render(report: ExplainReport) -> str:
    t = report.target
    out = [f"{t.kind} {t.display} (diagnosis: {report.source})"]
    d = report.diagnosis
    if d is None:
        return "\n".join([*out, _nothing_recorded(report)])
    age = time.time() - (d.time if d.time is not None else time.time())
    if report.source == "scheduler":
        out[0] += f", last attempt {age:.0f}s ago"
    out.append(f"  {d.message}")
    out += _quorum(d) + _members(d)
    if report.capacity:
        out += _capacity(report.capacity)
    out += _preemption(d)
    if report.fixes is not None:
        out += _fixes(report.fixes)
    return "\n".join(out)


def _nothing_recorded(report: ExplainReport) -> str:
    if report.would_bind is not None:
        nodes = ", ".join(f"{k} -> {v}" for k, v in sorted(report.would_bind.items()))
        return f"  schedulable now: the next attempt binds it ({nodes})"
    return "  the scheduler has no failed attempt recorded (bound, unknown, or not tried yet)"


def _quorum(d: Diagnosis) -> list[str]:
    q = d.quorum
    if q is None:
        return []
    out = [
        "",
        "QUORUM",
        f"  minCount {q.min_count} ({q.min_count_field}); placed before: "
        f"{q.already_placed}; would fit now: {q.fit}; pending pods: {q.pending}",
    ]
    if d.min_resources_shortfall:
        out.append(f"  minResources short: {d.min_resources_shortfall}")
    return out


def _members(d: Diagnosis) -> list[str]:
    # Members with the same verdict on one line.
    groups: dict[tuple[str, str], list[str]] = {}
    for m in d.members:
        groups.setdefault((m.reason, _rejections(m)), []).append(m.pod)
    rows = []
    for (reason, why), pods in groups.items():
        who = pods[0] if len(pods) == 1 else f"{pods[0]} (+{len(pods) - 1} more)"
        rows.append([who, reason, why])
    out = ["", "MEMBERS" if d.quorum else "POD"]
    out += [
        "  " + line
        for line in _table(["POD", "REASON", "REJECTED AT (first rejecting plugin)"], rows)
    ]
    for m in d.members[:1]:
        if m.reasons:
            reasons = ", ".join(f"{n} {r}" for r, n in m.reasons.items())
            out.append(f"  e.g. {m.pod}: {m.nodes} node(s): {reasons}")
    return out


def _capacity(cap: dict[str, Any]) -> list[str]:
    out = [
        "",
        f"CAPACITY (one member requests {fmt_vector(cap['request'])}; {cap['needed']} needed)",
    ]
    for dom in cap.get("domains") or []:
        short = f"; short {fmt_vector(dom['short'])}" if dom["short"] else ""
        if not short and dom["fit"] < dom["needed"]:
            short = (
                f"; {fmt_vector(dom['free'])} free in all, but no node has room for one more member"
            )
        if dom.get("excluded"):
            short += f" ({dom['excluded']} of {dom['nodes']} nodes excluded by filters)"
        out.append(f"  {dom['domain']}: {dom['fit']} of {dom['needed']} fit{short}")
    rows = [
        [
            r["node"],
            fmt_vector(r["free"]),
            str(r["fit"]),
            fmt_vector(r["short"]) if r["short"] else "-",
            f"excluded: {r['note']}" if r["note"] else "",
        ]
        for r in cap["nodes"]
    ]
    header = ["NODE", "FREE", "FIT", "SHORT FOR ONE", ""]
    return out + ["  " + line for line in _table(header, rows)]


def _preemption(d: Diagnosis) -> list[str]:
    pre = d.preemption
    if pre is not None:
        out = ["", "PREEMPTION", f"  {pre.result}: {pre.message}"]
        if pre.victims:
            out.append(f"  victims: {', '.join(pre.victims)}")
        return out
    if d.quorum is None and d.members and d.members[0].post_filter:
        return ["", "PREEMPTION", f"  {d.members[0].post_filter}"]
    if d.quorum is not None:
        return [
            "",
            "PREEMPTION",
            "  nothing evicted: no pod preemption may evict would make room for the gang",
        ]
    return []


def _fixes(fixes: list[dict[str, Any]]) -> list[str]:
    out = ["", "FIXES (each checked by running the scheduler on a modified copy of the cluster)"]
    if not fixes:
        out.append(
            "  none found among: more nodes like the best one, a lower minCount, "
            "running pods moved out of one node or domain"
        )
    for fix in fixes:
        out.append(f"  - {fix['fix']}  (checked: binds; {fix['checkSeconds']}s)")
        if fix.get("note"):
            out.append(f"    {fix['note']}")
    return out
