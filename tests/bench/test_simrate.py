"""``python -m bench simrate``: a smoke run at a tiny size through the real server
process (figures are checked for presence, never for speed)."""

from __future__ import annotations

from tests.bench.runner import run_bench

SMOKE_ARGS = ("--nodes", "20", "--existing-pods", "5", "--pods", "200", "--watchers", "2")


def test_binds_with_watchers_and_kubelets_attached() -> None:
    result = run_bench("simrate", *SMOKE_ARGS, timeout=120).result
    assert result["pods"] == 200 and result["kubelets"] is True
    assert result["binds_per_second"] > 0 and result["server_cpu_us_per_bind"] > 0
    # Both bindings and the kubelets' Running updates reached the pod watches.
    assert result["watch_mb"] > 0
