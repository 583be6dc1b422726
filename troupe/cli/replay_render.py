"""``troupe replay``'s text output: one run's placed and pending pods, gangs and
utilisation (``render``), or two runs side by side (``render_compare``, ``--compare``).
Called by ``troupe.cli.replay``."""

from __future__ import annotations

from troupe.cli.render import table as ruled_table
from troupe.sim.outcome import Outcome
from troupe.whatif.replay import Run


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """A table, or ``(none)`` when it has no rows."""
    return ruled_table(headers, rows) if rows else ["(none)"]


def _gang_rows(outcome: Outcome) -> list[list[str]]:
    return [
        [
            g["namespace"],
            g["name"],
            g["api"],
            str(g["minCount"]),
            str(g["bound"]),
            "bound" if g["minCount"] and g["bound"] >= g["minCount"] else "pending",
        ]
        for g in outcome.gangs
    ]


def render(run: Run) -> str:
    o = run.outcome
    placed = [p for p in o.pods if p["node"]]
    lines = [
        f"Profile {run.profile}: {len(placed)} of {len(o.pods)} pods placed on "
        f"{run.nodes} node{'' if run.nodes == 1 else 's'} ({run.seconds:.1f}s)",
        "",
        "Placed:",
        *table(
            ["namespace", "pod", "node"], [[p["namespace"], p["name"], p["node"]] for p in placed]
        ),
        "",
        "Pending:",
        *table(
            ["namespace", "pod", "reason"],
            [[p["namespace"], p["name"], p["reason"]] for p in o.pending],
        ),
        "",
        "Gangs:",
        *table(["namespace", "gang", "api", "minCount", "bound", "state"], _gang_rows(o)),
        "",
        "Utilisation:",
        *table(
            ["resource", "requested", "allocatable", "used", "largest free"],
            [
                [r, u["requested"], u["allocatable"], f"{u['percent']}%", o.fragmentation[r]]
                for r, u in o.utilisation.items()
            ],
        ),
    ]
    return "\n".join(lines)


def _placed(o: Outcome) -> str:
    return f"{sum(1 for p in o.pods if p['node'])}/{len(o.pods)}"


def _gangs_bound(o: Outcome) -> str:
    n = sum(1 for g in o.gangs if g["minCount"] and g["bound"] >= g["minCount"])
    return f"{n}/{len(o.gangs)}"


def _summary_rows(oa: Outcome, ob: Outcome) -> list[list[str]]:
    rows = [
        ["pods placed", _placed(oa), _placed(ob)],
        ["gangs bound", _gangs_bound(oa), _gangs_bound(ob)],
    ]
    for r in sorted(set(oa.utilisation) | set(ob.utilisation)):
        ua, ub = oa.utilisation.get(r), ob.utilisation.get(r)
        rows.append(
            [f"{r} used", f"{ua['percent']}%" if ua else "-", f"{ub['percent']}%" if ub else "-"]
        )
    for r in sorted(set(oa.fragmentation) | set(ob.fragmentation)):
        rows.append(
            [f"{r} largest free", oa.fragmentation.get(r, "-"), ob.fragmentation.get(r, "-")]
        )
    return rows


def _pod_rows(oa: Outcome, ob: Outcome) -> list[list[str]]:
    node_b = {(p["namespace"], p["name"]): p["node"] for p in ob.pods}
    return [
        [
            p["namespace"],
            p["name"],
            p["node"] or "-",
            node_b.get((p["namespace"], p["name"])) or "-",
        ]
        for p in oa.pods
    ]


def _gang_compare_rows(oa: Outcome, ob: Outcome) -> list[list[str]]:
    gangs_b = {(g["namespace"], g["name"], g["api"]): g["bound"] for g in ob.gangs}
    return [
        [
            g["namespace"],
            g["name"],
            str(g["minCount"]),
            str(g["bound"]),
            str(gangs_b.get((g["namespace"], g["name"], g["api"]), "-")),
        ]
        for g in oa.gangs
    ]


def render_compare(a: Run, b: Run) -> str:
    oa, ob = a.outcome, b.outcome
    reasons = [
        [run.profile, p["namespace"], p["name"], p["reason"]]
        for run in (a, b)
        for p in run.outcome.pending
    ]
    lines = [
        f"Compare {a.profile} vs {b.profile}:",
        *table(["", a.profile, b.profile], _summary_rows(oa, ob)),
        "",
        "Pods:",
        *table(["namespace", "pod", a.profile, b.profile], _pod_rows(oa, ob)),
        "",
        "Gangs (members bound):",
        *table(["namespace", "gang", "minCount", a.profile, b.profile], _gang_compare_rows(oa, ob)),
        "",
        "Pending reasons:",
        *table(["profile", "namespace", "pod", "reason"], reasons),
    ]
    return "\n".join(lines)
