"""Terminal output for ``troupe sim``: a progress bar and the summary table."""

from __future__ import annotations

from typing import TextIO

from troupe.sim.runner import Summary


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


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*headers), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in rows]
    return lines


def render_summary(s: Summary) -> str:
    lines = [
        f"Scenario {s.scenario!r}: {s.pods} pods in {s.seconds:.1f}s"
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
    lines.append("")
    lines += _table(
        ["workload", "pods", "scheduled", "pending"],
        [[app, str(n), str(ok), str(n - ok)] for app, n, ok in s.per_app],
    )
    if s.pending_reasons:
        lines.append("")
        lines.append("Pending pods, by reason:")
        for message, count in s.pending_reasons:
            lines.append(f"  {count:>4}  {message}")
    return "\n".join(lines)
