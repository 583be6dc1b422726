"""``python -m bench scale``: a tiny run through the real server process (the figures
are checked for presence and consistency, never for speed or memory)."""

from __future__ import annotations

from tests.bench.runner import run_bench

ARGS = ("--nodes", "20", "--existing-pods", "5", "--pods", "50")


def test_a_tiny_scale_run_binds_every_pod_and_reports_memory() -> None:
    result = run_bench("scale", *ARGS, timeout=120).result
    assert (result["pods"], result["scheduled"]) == (50, 50)
    assert result["pods_per_second"] > 0 and result["sync_seconds"] > 0
    assert 0 < result["rss_mb_before"] <= result["rss_mb_synced"]
    assert result["rss_mb_bound"] > 0 and result["peak_rss_mb"] > 0
    # Every pod in the cluster is alive once: in the informer's store and the cache.
    assert result["pods_alive"] == 55
