"""``python -m bench port``: a tiny run (the figures are checked for presence and
consistency, never for speed)."""

from __future__ import annotations

from tests.bench.runner import run_bench


def test_a_tiny_port_run_probes_through_stalled_connections_and_counts_the_log() -> None:
    args = ("--stalled", "40", "--probes", "5", "--hold", "0", "--malformed", "100")
    result = run_bench("port", *args, timeout=120).result
    assert result["stalled_opened"] == 40
    assert result["healthz_ok"] == result["probes"] == 5
    assert result["child_fds_peak"] >= 40
    assert result["malformed_sent"] == 100
    # One line for the first malformed request, none for the 99 others within the minute.
    assert 0 < result["malformed_log_bytes"] < 1000
    assert result["healthz_after_malformed"] is True
