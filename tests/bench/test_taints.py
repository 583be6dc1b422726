"""``python -m bench taints``: a smoke run at a tiny size (figures are checked for
presence and for what must not grow, never for speed)."""

from __future__ import annotations

from tests.bench.runner import run_bench


def test_taint_memory_stays_flat_as_distinct_values_churn() -> None:
    args = ("--nodes", "50", "--values", "400", "--carriers", "10", "--window", "100")
    run = run_bench("taints", *args, timeout=180)
    first, last = run.result["first"], run.result["last"]
    assert (run.result["values"], last["values"]) == (400, 400)
    # 400 distinct values, never more than 10 nodes carrying one at a time (11 while
    # a node swaps its value): ids are reused and the matrix stops growing.
    assert first["taint_ids"] == last["taint_ids"] <= 11
    assert first["taint_rows"] == last["taint_rows"] <= 16
    assert last["taint_matrix_mb"] == first["taint_matrix_mb"]
    assert all(last[k] > 0 for k in ("update_us_median", "plugin_us_median", "rss_mb"))
    assert len(run.stdout.splitlines()) == 1 + 4 + 1  # header, one line per window, JSON
