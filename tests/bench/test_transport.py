"""``python -m bench transport``: a smoke run at a tiny size through the real server
process (figures are checked for presence and consistency, never for speed)."""

from __future__ import annotations

from typing import Any

import pytest
from bench.transport import summarize

from tests.bench.runner import run_bench

SMOKE_ARGS = ("--requests", "100", "--rounds", "1", "--concurrency", "4")
PATHS = ("aiohttp", "http1")


@pytest.fixture(scope="module")
def smoke() -> dict[str, Any]:
    return run_bench("transport", *SMOKE_ARGS, timeout=180).result


@pytest.mark.parametrize("path", PATHS)
def test_every_path_is_measured(smoke: dict[str, Any], path: str) -> None:
    cpu = smoke[f"{path}_cpu_us_per_request"]
    assert cpu > 0 and smoke[f"{path}_requests_per_second"] > 0
    assert smoke[f"{path}_user_us_per_request"] >= 0 <= smoke[f"{path}_sys_us_per_request"]
    assert smoke[f"{path}_cpu_us_per_request_median"] == cpu  # one round: best is median


def test_the_smoke_run_reports_a_ratio_of_one_round(smoke: dict[str, Any]) -> None:
    assert smoke["ratio"] > 0
    assert (smoke["requests_per_round"], smoke["rounds"]) == (100, 1)


def _round(cpu: float) -> dict[str, float]:
    return {"cpu_us_per_request": cpu, "requests_per_second": 1e6 / cpu}


def test_the_ratio_compares_the_best_rounds_unrounded() -> None:
    # The best (least CPU) round of each path, not the first or the median; the
    # ratio is taken before the figures are rounded for printing.
    summary = summarize(
        {
            "aiohttp": [_round(80.04), _round(79.96), _round(90.0)],
            "http1": [_round(25.04), _round(24.96), _round(30.0)],
        }
    )
    assert summary["ratio"] == round(79.96 / 24.96, 2) == 3.2
    assert summary["aiohttp_cpu_us_per_request"] == 80.0
    assert summary["http1_cpu_us_per_request_median"] == 25.0
    assert summary["aiohttp_cpu_us_per_request_median"] == 80.0
