"""The HTML report of ``troupe sim --report`` and ``troupe replay --report``.

One self-contained page (plotly's JavaScript is inlined: it opens without network)
per command, with one section per run (``troupe replay --compare`` has two):

1. a heatmap of node utilisation: one row per node, grouped by zone and rack, one
   column per resource (cpu, memory, pods, GPUs), coloured by requested/allocatable
   at the end of the run;
2. a gang timeline: for each gang, when it was submitted, when its members were bound
   and, when known, when it finished;
3. the pending pods and the message of their last ``PodScheduled=False``.

The data comes as plain dicts (``sim_run`` and ``replay_run`` build them from a
``Summary`` and an ``Outcome``) and is embedded in the page as JSON
(``<script type="application/json" id="troupe-report-data">``), so the page can be
checked, or its numbers reused, without parsing the figures.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Final

import plotly.graph_objects as go

from troupe.sim.outcome import Outcome
from troupe.sim.runner import Summary
from troupe.sim.usage import NodeUsage, format_amount, shown

DATA_ID: Final = "troupe-report-data"
RESOURCE_ORDER: Final = ("cpu", "memory", "pods")
SIM_TIMES: Final = (
    "Seconds from the start of the scenario: submitted when the gang's group object "
    "and pods were created, bound when its first and last members were, finished when "
    "its last member succeeded."
)
REPLAY_TIMES: Final = (
    "Seconds from the start of the replay's scheduler. A replay has no submission "
    "times: every pod of the snapshot is there when the scheduler starts (submitted 0). "
    "Bound: when the replay bound its first and last members (members bound in the "
    "snapshot already have no time). Pods never finish in a replay."
)
SEGMENTS: Final = {
    "waiting": "#f0a030",
    "binding": "#5b8def",
    "bound": "#3aa66a",
    "bound in the snapshot": "#9aa0a6",
}


def _resource_key(resource: str) -> tuple[int, str]:
    order = RESOURCE_ORDER.index(resource) if resource in RESOURCE_ORDER else len(RESOURCE_ORDER)
    return order, resource


def _value(resource: str, amount: int) -> float | int:
    """cpu in cores, anything else in its own unit (memory in bytes)."""
    return amount / 1000 if resource == "cpu" else amount


def nodes_json(nodes: list[NodeUsage]) -> list[dict[str, Any]]:
    """Each node (sorted by zone, rack, name) and, per resource it has, requested,
    allocatable, percent used and the two as text."""
    out = []
    for n in sorted(nodes, key=lambda n: (n.zone, n.rack, n.name)):
        resources = {}
        for r in sorted((r for r in n.allocatable if shown(r)), key=_resource_key):
            total, used = n.allocatable[r], n.requested.get(r, 0)
            resources[r] = {
                "requested": _value(r, used),
                "allocatable": _value(r, total),
                "percent": round(100 * used / total, 1) if total else 0.0,
                "text": f"{format_amount(r, used)} / {format_amount(r, total)}",
            }
        out.append({"name": n.name, "zone": n.zone, "rack": n.rack, "resources": resources})
    return out


def sim_run(summary: Summary) -> dict[str, Any]:
    """The report data of a ``troupe sim`` run."""
    return {
        "label": summary.scenario,
        "seconds": round(summary.seconds, 3),
        "pods": summary.pods,
        "bound": summary.scheduled,
        "pending": summary.pending,
        "timedOut": summary.timed_out,
        "timesNote": SIM_TIMES,
        "nodes": nodes_json(summary.node_usage),
        "gangs": [
            {
                "namespace": g.namespace,
                "name": g.name,
                "api": g.api,
                "size": g.size,
                "minMember": g.min_member,
                "bound": g.bound,
                "boundBefore": 0,
                "outcome": str(g.outcome),
                "submitted": round(g.submitted, 3),
                "firstBound": _round(g.first_bound),
                "lastBound": _round(g.last_bound),
                "finished": _round(g.finished),
            }
            for g in summary.gangs
        ],
        "pendingPods": [{"pod": pod, "reason": reason} for pod, reason in summary.pending_pods],
    }


def replay_run(profile: str, outcome: Outcome, seconds: float) -> dict[str, Any]:
    """The report data of one ``troupe replay`` run (one profile)."""
    times = {(t["namespace"], t["name"], t["api"]): t for t in outcome.timeline}
    gangs = []
    for g in outcome.gangs:
        t = times.get((g["namespace"], g["name"], g["api"]), {})
        scheduled = g["minCount"] and g["bound"] >= g["minCount"]
        gangs.append(
            {
                "namespace": g["namespace"],
                "name": g["name"],
                "api": g["api"],
                "size": t.get("members", g["bound"]),
                "minMember": g["minCount"],
                "bound": g["bound"],
                "boundBefore": t.get("boundBefore", 0),
                "outcome": "scheduled" if scheduled else "pending" if not g["bound"] else "partial",
                "submitted": 0.0,
                "firstBound": _round(t.get("firstBound")),
                "lastBound": _round(t.get("lastBound")),
                "finished": None,
            }
        )
    return {
        "label": profile,
        "seconds": round(seconds, 3),
        "pods": len(outcome.pods),
        "bound": sum(1 for p in outcome.pods if p["node"]),
        "pending": len(outcome.pending),
        "timedOut": False,
        "timesNote": REPLAY_TIMES,
        "nodes": nodes_json(outcome.nodes),
        "gangs": gangs,
        "pendingPods": [
            {"pod": f"{p['namespace']}/{p['name']}", "reason": p["reason"]} for p in outcome.pending
        ],
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def heatmap(run: dict[str, Any]) -> go.Figure:
    nodes = run["nodes"]
    resources = sorted({r for n in nodes for r in n["resources"]}, key=_resource_key)
    names = [" · ".join(part for part in (n["zone"], n["rack"], n["name"]) if part) for n in nodes]
    z = [[n["resources"].get(r, {}).get("percent") for r in resources] for n in nodes]
    text = [[n["resources"].get(r, {}).get("text", "-") for r in resources] for n in nodes]
    fig = go.Figure(
        go.Heatmap(
            x=resources,
            y=names,
            z=z,
            text=text,
            texttemplate="%{text}",
            zmin=0,
            zmax=100,
            colorscale="YlOrRd",
            colorbar={"title": {"text": "% requested"}},
            hovertemplate="%{y}<br>%{x}: %{text} (%{z}%)<extra></extra>",
            xgap=1,
            ygap=1,
        )
    )
    fig.update_layout(
        title="Node utilisation at the end of the run (requested / allocatable)",
        height=max(280, 26 * len(nodes) + 140),
        yaxis={"autorange": "reversed", "type": "category"},
        xaxis={"side": "top", "type": "category"},
        margin={"l": 10, "r": 10, "t": 90, "b": 20},
    )
    return fig


def timeline(run: dict[str, Any]) -> go.Figure:
    end = float(run["seconds"])
    bars: dict[str, tuple[list[str], list[float], list[float], list[str]]] = {
        name: ([], [], [], []) for name in SEGMENTS
    }

    def add(segment: str, gang: str, start: float, stop: float, hover: str) -> None:
        y, base, width, hovers = bars[segment]
        y.append(gang)
        base.append(start)
        width.append(max(stop - start, end / 500 if end else 0.001))
        hovers.append(hover)

    for g in run["gangs"]:
        name = f"{g['namespace']}/{g['name']}"
        hover = (
            f"{name} ({g['api']})<br>{g['bound']} of {g['size']} bound, "
            f"minMember {g['minMember']}: {g['outcome']}"
        )
        first, last, finished = g["firstBound"], g["lastBound"], g["finished"]
        if first is None and g["boundBefore"]:
            add("bound in the snapshot", name, 0.0, end, hover)
            continue
        add("waiting", name, g["submitted"], first if first is not None else end, hover)
        if first is None:
            continue
        if last > first:
            add("binding", name, first, last, hover)
        add("bound", name, last, finished if finished is not None else end, hover)
    fig = go.Figure()
    for segment, (y, base, width, hovers) in bars.items():
        if y:
            fig.add_trace(
                go.Bar(
                    name=segment,
                    y=y,
                    x=width,
                    base=base,
                    orientation="h",
                    marker_color=SEGMENTS[segment],
                    hovertext=hovers,
                    hovertemplate="%{hovertext}<br>%{base:.2f}s + %{x:.2f}s<extra>"
                    + segment
                    + "</extra>",
                )
            )
    gangs = [f"{g['namespace']}/{g['name']}" for g in run["gangs"]]
    fig.update_layout(
        title="Gangs: submitted, bound, finished (seconds)",
        barmode="overlay",
        height=max(240, 28 * len(gangs) + 140),
        xaxis={"title": {"text": "seconds"}, "range": [0, end * 1.02 or 1]},
        yaxis={"autorange": "reversed", "type": "category", "categoryarray": gangs},
        margin={"l": 10, "r": 10, "t": 60, "b": 40},
    )
    return fig


STYLE: Final = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; margin-top: 2em; }
.note { color: #555; max-width: 60em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
"""


def _pending_table(run: dict[str, Any]) -> str:
    rows = run["pendingPods"]
    if not rows:
        return "<p>No pod is pending.</p>"
    body = "".join(
        f"<tr><td>{html.escape(r['pod'])}</td><td>{html.escape(r['reason'])}</td></tr>"
        for r in rows
    )
    return (
        '<table class="pending"><thead><tr><th>pod</th><th>reason</th></tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def _embedded_json(doc: dict[str, Any]) -> str:
    # No "</script>" (or other markup) can end the block early.
    text = json.dumps(doc, indent=1, sort_keys=True)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def render(title: str, source: str, runs: list[dict[str, Any]]) -> str:
    """The page: ``source`` is "sim" or "replay"; ``runs`` from ``sim_run``/``replay_run``."""
    doc = {"title": title, "source": source, "runs": runs}
    sections = []
    plotly_js: bool = True  # inlined once, with the first figure
    for i, run in enumerate(runs):
        figures = []
        for kind, make, empty in (
            ("heatmap", heatmap, "" if run["nodes"] else "No nodes at the end of the run."),
            ("timeline", timeline, "" if run["gangs"] else "No gangs in this run."),
        ):
            if empty:
                figures.append(f"<p>{empty}</p>")
                continue
            figures.append(
                make(run).to_html(
                    full_html=False,
                    include_plotlyjs=plotly_js,
                    div_id=f"troupe-{kind}-{i}",
                    config={"displaylogo": False, "responsive": True},
                )
            )
            plotly_js = False
        heat, gantt = figures
        summary = (
            f"{run['bound']} of {run['pods']} pods bound, {run['pending']} pending, "
            f"{len(run['nodes'])} nodes, {len(run['gangs'])} gangs, {run['seconds']:.1f}s"
            + (" (timed out)" if run["timedOut"] else "")
        )
        sections.append(
            f"<section><h2>{html.escape(run['label'])}</h2>"
            f"<p>{html.escape(summary)}</p>"
            f"<h3>Node utilisation</h3>{heat}"
            f"<h3>Gang timeline</h3><p class='note'>{html.escape(run['timesNote'])}</p>{gantt}"
            f"<h3>Pending pods</h3>{_pending_table(run)}</section>"
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n<body>"
        f"<h1>{html.escape(title)}</h1>\n"
        + "\n".join(sections)
        + f'\n<script type="application/json" id="{DATA_ID}">\n{_embedded_json(doc)}\n</script>'
        + "\n</body></html>\n"
    )


def write(path: str | Path, title: str, source: str, runs: list[dict[str, Any]]) -> Path:
    out = Path(path)
    out.write_text(render(title, source, runs), encoding="utf-8")
    return out
