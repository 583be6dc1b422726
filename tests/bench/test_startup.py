"""``python -m bench startup``: a smoke run at a tiny size (figures are checked for
presence, never for speed); with a watching plugin, its informer has listed every
ConfigMap by the time the daemon's start returns."""

from __future__ import annotations

from tests.bench.runner import run_bench


def test_start_up_with_and_without_a_plugin_owned_informer() -> None:
    plain = run_bench("startup", "--nodes", "5", "--runs", "1", timeout=120).result
    assert plain["watching"] is None and plain["listed_at_start"] == 0 and plain["min_ms"] > 0
    watching = run_bench(
        "startup", "--nodes", "5", "--runs", "1", "--watching", "7", timeout=120
    ).result
    assert watching["listed_at_start"] == 7
