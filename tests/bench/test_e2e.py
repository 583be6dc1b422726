"""``python -m bench e2e``: a tiny run through the real server processes (the figures
are checked for presence and consistency, never for speed)."""

from __future__ import annotations

from tests.bench.runner import run_bench


def test_a_tiny_e2e_run_reports_troupe_bind_only_and_the_paced_bind_only_run() -> None:
    args = ("--nodes", "20", "--existing-pods", "5", "--pods", "200", "--paced")
    result = run_bench("e2e", *args, timeout=180).result
    assert result["pods"] == 200
    rate, limit = result["pods_per_second"], result["bind_only_pods_per_second"]
    assert rate > 0 and limit > 0
    assert result["ratio"] == round(rate / limit, 3)
    for key in (
        "cpu_us_per_pod",
        "server_cpu_us_per_pod",
        "bind_only_server_cpu_us_per_pod",
        "paced_bind_only_client_cpu_us_per_pod",
        "paced_bind_only_server_cpu_us_per_pod",
    ):
        assert result[key] > 0, key
    # Held to troupe's pace (a burst of 8 beyond it), never much faster.
    assert 0 < result["paced_bind_only_pods_per_second"] <= rate * 1.5 + 8


def test_a_tiny_run_against_a_slow_server_grows_the_binding_slots() -> None:
    """``--latency``: the server holds every request 100 ms; at a qps of 400 the
    scheduler needs about 60 bindings in flight, not 8."""
    args = ("--nodes", "20", "--existing-pods", "5", "--pods", "400", "--concurrency", "8")
    args += ("--latency", "0.1", "--qps", "400", "--bind-only-concurrency", "128")
    result = run_bench("e2e", *args, timeout=300).result
    assert (result["latency_s"], result["qps"]) == (0.1, 400.0)
    assert result["binding_slots_at_end"] >= 400 * 0.1
    # Every binding took at least the server's 100 ms.
    assert result["p99_e2e_ms"] >= 100
