"""Terminal output for ``troupe sim``: a progress bar and the summary tables.

``render_summary`` prints the totals, the plain pods per workload with pending
reasons, and one row per gang (outcome, when it was submitted, bound and finished,
the topology domain its members landed in, and why a pending gang waits). Called by
``troupe.cli.sim``.
"""

from __future__ import annotations

from typing import TextIO

from troupe.sim.runner import GangOutcome, GangRow, Summary


class ProgressBar:
    """``[#########-----------]  120/300 pods scheduled   2.4s`` redrawn in place."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        self.stream = stream
        self.width = width
        self._last = ""
        self._counts = (-1, -1)
        # Not a terminal (CI logs, pipes): one line per change of counts, no redraws.
        self._tty = stream.isatty()

    def __call__(self, scheduled: int, total: int, seconds: float) -> None:
        filled = int(self.width * scheduled / total) if total else 0
        bar = (
            f"[{'#' * filled}{'-' * (self.width - filled)}] "
            f"{scheduled:>5}/{total:<5} pods scheduled {seconds:6.1f}s"
        )
        if self._tty:
            self.stream.write("\r" + bar)
        elif (scheduled, total) != self._counts:
            self.stream.write(bar + "\n")
        else:
            return
        self.stream.flush()
        self._last = bar
        self._counts = (scheduled, total)

    def close(self) -> None:
        if self._last and self._tty:
            self.stream.write("\n")
            self.stream.flush()


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell under a dashed rule (``troupe sim`` and
    ``troupe replay``)."""
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*headers), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in rows]
    return [line.rstrip() for line in lines]


def render_summary(s: Summary) -> str:
    cluster = f" on {s.nodes} nodes" if s.nodes else ""
    if s.capacity:
        cluster += " (" + ", ".join(f"{q} {r}" for r, q in s.capacity.items()) + ")"
    lines = [
        f"Scenario {s.scenario!r}: {s.pods} pods{cluster} in {s.seconds:.1f}s"
        + (" (timed out)" if s.timed_out else "")
    ]
    lines.append(
        f"  scheduled {s.scheduled}, pending {s.pending}, ran to completion {s.succeeded}; "
        f"peak throughput {s.pods_per_second:.0f} pods/s (busiest second)"
    )
    if s.latency_ms:
        lat = s.latency_ms
        lines.append(
            f"  creation to binding: p50 {lat['p50']:.1f} ms, p90 {lat['p90']:.1f} ms, "
            f"p99 {lat['p99']:.1f} ms, max {lat['max']:.1f} ms"
        )
    if s.per_app:
        lines.append("")
        lines += table(
            ["workload", "pods", "scheduled", "pending"],
            [[app, str(n), str(ok), str(n - ok)] for app, n, ok in s.per_app],
        )
    if s.pending_reasons:
        lines.append("")
        lines.append("Pending pods, by reason:")
        for message, count in s.pending_reasons:
            lines.append(f"  {count:>4}  {message}")
    if s.gangs:
        lines.append("")
        lines += _gangs(s.gangs)
    return "\n".join(lines)


# Long enough for "gang <ns>/<name>: 6 of 8 required pods fit; 0/14 nodes are
# available: 10 Insufficient nvidia.com/gpu, 4 ..." to say what is short where.
WHY_WIDTH = 160


def _truncate(text: str, width: int = WHY_WIDTH) -> str:
    if len(text) <= width:
        return text
    cut = text[: width - 3]
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut).rstrip(" ,;:") + "..."


def _seconds(first: float | None, last: float | None = None) -> str:
    if first is None:
        return "-"
    if last is None or last - first < 0.05:
        return f"{first:.1f}s"
    return f"{first:.1f}-{last:.1f}s"


def _gangs(gangs: list[GangRow]) -> list[str]:
    headers = ["gang", "api", "size", "each pod", "minMember", "bound", "outcome"]
    headers += ["submitted", "bound at", "finished", "domain"]
    rows = [
        [
            g.name,
            g.api,
            str(g.size),
            g.requests,
            str(g.min_member),
            str(g.bound),
            g.outcome.upper() + "!" if g.outcome is GangOutcome.PARTIAL else str(g.outcome),
            _seconds(g.submitted),
            _seconds(g.first_bound, g.last_bound),
            _seconds(g.finished),
            g.domain,
        ]
        for g in gangs
    ]
    lines = ["Gangs:", *table(headers, rows)]
    waiting = [g for g in gangs if g.outcome in (GangOutcome.PENDING, GangOutcome.PARTIAL)]
    if waiting:
        lines += ["", "Pending gangs, by their last scheduling attempt:"]
        width = max(len(g.name) for g in waiting)
        for g in waiting:
            lines.append(f"  {g.name:<{width}}  {_truncate(g.message or 'not attempted yet')}")
            if g.pod_reasons:
                counts = ", ".join(f"{n} {reason}" for reason, n in g.pod_reasons)
                lines.append(f"  {'':<{width}}  pods: {counts}")
    for g in gangs:
        if g.outcome is GangOutcome.PARTIAL:
            lines.append(
                f"!! gang {g.namespace}/{g.name} is partly bound: {g.bound} of minMember "
                f"{g.min_member}. troupe must never leave a gang like this; please report it."
            )
    return lines
