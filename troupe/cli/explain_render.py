"""``troupe explain``'s text output (``-o text``): the diagnosis, the quorum, the
members, the capacity per domain and node, preemption and the checked fixes."""

from __future__ import annotations

import time
from typing import Any

from troupe.cli.explain_capacity import fmt_vector


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    return [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip()
        for row in [header, *rows]
    ]


def _rejections(member: dict[str, Any]) -> str:
    if member.get("reason") == "CoschedulingNotMeetMinMember":
        where = member.get("fitsOn")
        return f"fits (on {where}); waits for the quorum" if where else "fits; waits for the quorum"
    parts = [
        f"{r['extensionPoint']}/{r['plugin']}: {r['nodes']} node(s)"
        for r in member.get("rejections") or []
    ]
    if member.get("preFilter"):
        parts.append(f"PreFilter: {member['preFilter']}")
    return "; ".join(parts) or member.get("message") or member.get("code") or "-"


def render(report: dict[str, Any]) -> str:
    t = report["target"]
    out = [f"{t['kind']} {t['name']} (diagnosis: {report['source']})"]
    d = report.get("diagnosis")
    if d is None:
        if "wouldBind" in report:
            nodes = ", ".join(f"{k} -> {v}" for k, v in sorted(report["wouldBind"].items()))
            out.append(f"  schedulable now: the next attempt binds it ({nodes})")
        else:
            out.append(
                "  the scheduler has no failed attempt recorded (bound, unknown, or not tried yet)"
            )
        return "\n".join(out)
    age = time.time() - float(d.get("time") or time.time())
    if report["source"] == "scheduler":
        out[0] += f", last attempt {age:.0f}s ago"
    out.append(f"  {d.get('message', '')}")
    quorum = d.get("quorum")
    if quorum:
        out += [
            "",
            "QUORUM",
            f"  minCount {quorum['minCount']} ({quorum['minCountField']}); placed before: "
            f"{quorum['alreadyPlaced']}; would fit now: {quorum['fit']}; pending pods: "
            f"{quorum['pending']}",
        ]
        if d.get("minResourcesShortfall"):
            out.append(f"  minResources short: {d['minResourcesShortfall']}")
    # Members with the same verdict on one line.
    groups: dict[tuple[str, str], list[str]] = {}
    for m in d.get("members") or []:
        groups.setdefault((m["reason"], _rejections(m)), []).append(m["pod"])
    rows = []
    for (reason, why), pods in groups.items():
        who = pods[0] if len(pods) == 1 else f"{pods[0]} (+{len(pods) - 1} more)"
        rows.append([who, reason, why])
    out += ["", "MEMBERS" if quorum else "POD"]
    out += [
        "  " + line
        for line in _table(["POD", "REASON", "REJECTED AT (first rejecting plugin)"], rows)
    ]
    for m in (d.get("members") or [])[:1]:
        if m.get("reasons"):
            reasons = ", ".join(f"{n} {r}" for r, n in m["reasons"].items())
            out.append(f"  e.g. {m['pod']}: {m.get('nodes', 0)} node(s): {reasons}")
    cap = report.get("capacity")
    if cap:
        out += [
            "",
            f"CAPACITY (one member requests {fmt_vector(cap['request'])}; {cap['needed']} needed)",
        ]
        for dom in cap.get("domains") or []:
            short = f"; short {fmt_vector(dom['short'])}" if dom["short"] else ""
            if not short and dom["fit"] < dom["needed"]:
                short = (
                    f"; {fmt_vector(dom['free'])} free in all, but no node has room "
                    "for one more member"
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
        out += ["  " + line for line in _table(["NODE", "FREE", "FIT", "SHORT FOR ONE", ""], rows)]
    pre = d.get("preemption")
    if pre:
        out += ["", "PREEMPTION", f"  {pre['result']}: {pre['message']}"]
        if pre.get("victims"):
            out.append(f"  victims: {', '.join(pre['victims'])}")
    elif quorum is None and d["members"] and d["members"][0].get("postFilter"):
        out += ["", "PREEMPTION", f"  {d['members'][0]['postFilter']}"]
    elif quorum is not None:
        out += [
            "",
            "PREEMPTION",
            "  nothing evicted: no pod preemption may evict would make room for the gang",
        ]
    if "fixes" in report:
        out += [
            "",
            "FIXES (each checked by running the scheduler on a modified copy of the cluster)",
        ]
        if not report["fixes"]:
            out.append(
                "  none found among: more nodes like the best one, a lower minCount, "
                "running pods moved out of one node or domain"
            )
        for fix in report["fixes"]:
            out.append(f"  - {fix['fix']}  (checked: binds; {fix['checkSeconds']}s)")
            if fix.get("note"):
                out.append(f"    {fix['note']}")
    return "\n".join(out)
