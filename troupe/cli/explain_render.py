"""``troupe explain``'s report and its output: ``ExplainReport.to_json`` for ``-o json``,
``render`` for text (the diagnosis, the quorum, the members, the capacity per domain
and node, preemption and the checked fixes). Called by ``troupe.cli.explain``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final

from troupe.whatif.buy import noun
from troupe.whatif.diagnosis import Diagnosis, Member
from troupe.whatif.fit import fmt_vector
from troupe.whatif.held import Held
from troupe.whatif.state import Target

DOMAINS_SHOWN: Final = 6  # domains listed, closest first (--all: every one)
NODES_SHOWN: Final = 12  # nodes listed, closest first (--all: every one)


@dataclass
class ExplainReport:
    target: Target
    source: str  # "scheduler", "offline", or "held" (before any attempt)
    diagnosis: Diagnosis | None = None
    would_bind: dict[str, str] | None = None  # offline, bound: pod -> node
    capacity: dict[str, Any] | None = None
    fixes: list[dict[str, Any]] | None = None  # None: not looked for
    show_all: bool = False  # list every domain and node (--all)
    held: Held | None = None  # why it is not attempted at all
    fallback: str = ""  # why the scheduler was not asked after all (offline then)
    fallback_why: str = ""  # the same in a few words, for the header
    asked: str = ""  # the scheduler that answered

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "target": {"kind": self.target.kind, "name": self.target.display},
            "source": self.source,
            "diagnosis": self.diagnosis.to_json() if self.diagnosis is not None else None,
        }
        if self.held is not None:
            h = self.held
            out["held"] = {
                "message": h.message,
                "readFrom": h.source,
                "pods": list(h.pods),
                "hint": h.hint,
            }
        if self.fallback:
            out["fallback"] = self.fallback
        if self.asked:
            out["scheduler"] = self.asked
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
    if report.held is not None:
        return _held(report, report.held)
    source = report.source
    if report.fallback:
        source += f", because {report.fallback_why or 'the scheduler was not asked'}"
    out = [f"{t.kind} {t.display} (diagnosis: {source})"]
    d = report.diagnosis
    if d is None:
        return "\n".join([*out, _nothing_recorded(report)])
    age = time.time() - (d.time if d.time is not None else time.time())
    if report.source == "scheduler":
        out[0] += f", last attempt {age:.0f}s ago"
    out.append(f"  {d.message}")
    out += _quorum(d) + _members(d)
    if report.capacity:
        out += _capacity(report.capacity, report.show_all)
    out += _preemption(d)
    if report.fixes is not None:
        out += _fixes(report.fixes)
    return "\n".join(out)


def _held(report: ExplainReport, held: Held) -> str:
    t = report.target
    count = len(held.pods)
    out = [
        f"{t.kind} {t.display} (held before any attempt; read from the {held.source})",
        f"  {held.message}",
        "",
        f"  The scheduler does not try {'its ' + str(count) + ' pods' if count > 1 else 'it'} "
        "until this changes: there is no attempt to diagnose.",
    ]
    if held.hint:
        out.append(f"  To release it: {held.hint}.")
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


def _capacity(cap: dict[str, Any], show_all: bool) -> list[str]:
    out = [
        "",
        f"CAPACITY (one member requests {fmt_vector(cap['request'])}; {cap['needed']} needed)",
    ]
    if cap.get("limit"):
        out.append(f"  {cap['limit']}")
    domains = cap.get("domains") or []
    shown = domains if show_all else domains[:DOMAINS_SHOWN]
    for dom in shown:
        out.append(f"  {_domain_line(dom)}")
    what = noun(cap.get("level") or "")
    if len(shown) < len(domains):
        out.append(f"  ... {len(domains) - len(shown)} more {what}s (--all lists them)")
    if cap.get("unlabelled") and not show_all:
        out.append(
            f"  {_count(cap['unlabelled'], 'node')} without the label {cap['level']}: "
            f"in no {what}, so the gang cannot use them"
        )
    rows = cap["nodes"]
    listed = rows if show_all or len(rows) <= NODES_SHOWN else rows[:NODES_SHOWN]
    table = [
        [
            r["node"],
            fmt_vector(r["free"]),
            str(r["fit"]),
            fmt_vector(r["short"]) if r["short"] else "-",
            f"excluded: {r['note']}" if r["note"] else "",
        ]
        for r in listed
    ]
    header = ["NODE", "FREE", "FIT", "SHORT FOR ONE", ""]
    out += ["  " + line for line in _table(header, table)]
    if len(listed) < len(rows):
        out.append(
            f"  ... {_hidden(rows[len(listed) :], cap.get('level') or '')} (--all lists them)"
        )
    return out


def _domain_line(dom: dict[str, Any]) -> str:
    short = f"; short {fmt_vector(dom['short'])}" if dom["short"] else ""
    if not short and dom["fit"] < dom["needed"]:
        short = f"; {fmt_vector(dom['free'])} free in all, but no node has room for one more member"
    if dom.get("excluded"):
        short += f" ({dom['excluded']} of {dom['nodes']} nodes excluded by filters)"
    return f"{dom['domain']}: {dom['fit']} of {dom['needed']} fit{short}"


def _count(n: int, noun_: str) -> str:
    return f"{n} {noun_}{'' if n == 1 else 's'}"


def _hidden(rows: list[dict[str, Any]], level: str) -> str:
    """``20 more nodes: 20 with no nvidia.com/gpu``: what the rows not listed are."""
    kinds: dict[str, int] = {}
    for r in rows:
        if r["note"]:
            kind = "excluded by filters"
        elif r["lacks"]:
            kind = f"with no {', '.join(r['lacks'])}"
        elif level and r.get("domain") is None:
            kind = f"without the label {level}"
        elif r["fit"]:
            kind = "with room"
        else:
            kind = "short for one member"
        kinds[kind] = kinds.get(kind, 0) + 1
    parts = ", ".join(f"{n} {k}" for k, n in kinds.items())
    return f"{_count(len(rows), 'more node')}: {parts}"


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
            "  none found among: more nodes of one shape in one domain, a lower minCount, "
            "running pods moved out of one node or domain"
        )
    for fix in fixes:
        out.append(f"  - {fix['fix']}  (checked: binds; {fix['checkSeconds']}s)")
        if fix.get("note"):
            out.append(f"    {fix['note']}")
    return out
