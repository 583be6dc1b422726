"""``python -m bench soak``: the memory slope, and a short run through the real server
process and kubelets (the output is checked for presence and consistency, never for
speed or memory)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from bench.allocators import malloc_figures, pymalloc_figures
from bench.soak import slope_mb_per_10min

from tests.bench.runner import run_bench

SMOKE_ARGS = ("--minutes", "0.3", "--interval", "5", "--nodes", "20", "--rate", "10")


@pytest.mark.parametrize(
    ("samples", "warmup", "slope"),
    [
        ([(0.0, 100.0), (1.0, 100.0), (2.0, 100.0)], 0.0, 0.0),
        ([(0.0, 100.0), (1.0, 101.0), (2.0, 102.0)], 0.0, 10.0),
        ([(0.0, 50.0), (1.0, 100.0), (2.0, 100.0), (3.0, 100.0)], 1.0, 0.0),
        ([(0.0, 100.0), (10.0, 99.0), (20.0, 101.0), (30.0, 100.0)], 0.0, 0.2),
        ([(0.0, 100.0), (1.0, 200.0)], 1.0, None),
        ([], 0.0, None),
    ],
    ids=[
        "flat memory has no slope",
        "one MB a minute is ten per ten minutes",
        "samples before the warm-up do not count",
        "least squares over noisy samples",
        "one sample after the warm-up gives no slope",
        "no samples give no slope",
    ],
)
def test_memory_slope(
    samples: list[tuple[float, float]], warmup: float, slope: float | None
) -> None:
    result = slope_mb_per_10min(samples, warmup)
    if slope is None:
        assert result is None
    else:
        assert result == pytest.approx(slope, abs=1e-9)


@pytest.fixture(scope="module")
def soak() -> tuple[dict[str, Any], str]:
    run = run_bench("soak", *SMOKE_ARGS, timeout=180)
    assert "background task failed" not in run.stderr, run.stderr[-2000:]
    return run.result, run.stdout


def test_a_short_soak_creates_binds_and_samples(soak: tuple[dict[str, Any], str]) -> None:
    result, _ = soak
    assert result["minutes"] == 0.3 and result["rate"] == 10
    assert result["pods_created"] > 0
    assert 0 < result["pods_bound"] <= result["pods_created"]
    # A sample before the churn, one per interval and one at the end.
    samples = result["samples"]
    assert len(samples) >= 3
    assert samples[0]["minutes"] == 0.0 and samples[0]["pods_created"] == 0
    minutes = [s["minutes"] for s in samples]
    assert minutes == sorted(minutes)
    for s in samples:
        assert s["rss_mb"] > 0 and s["pods_alive"] >= 0
        assert 0 <= s["lag_p99_ms"] <= s["lag_max_ms"]
        assert 0 <= s["idle_lag_p99_ms"] <= s["idle_lag_max_ms"]
    assert samples[-1]["pods_bound"] <= result["pods_bound"]
    assert "rss_mb_per_10min" in result


def test_a_short_soak_prints_a_line_per_sample(soak: tuple[dict[str, Any], str]) -> None:
    result, stdout = soak
    lines = stdout.strip().splitlines()
    assert sum(" min: rss " in line for line in lines) == len(result["samples"])
    assert lines[-2].startswith("memory slope after")


def test_allocator_figures_read_pymalloc_and_leave_stderr_working(
    capfd: pytest.CaptureFixture[str],
) -> None:
    figures = pymalloc_figures()
    assert figures["arenas allocated current"] > 0
    assert figures["bytes in allocated blocks"] > 0
    print("still here", file=sys.stderr)
    assert "still here" in capfd.readouterr().err
    malloc = malloc_figures()
    assert not malloc or malloc["heap"] > 0
