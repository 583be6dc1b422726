"""``python -m bench transport``: a smoke run at a tiny size through the real server
process (figures are checked for presence and consistency, never for speed)."""

from __future__ import annotations

from typing import Any

import pytest

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


def test_the_ratio_compares_the_best_rounds(smoke: dict[str, Any]) -> None:
    http1 = smoke["http1_cpu_us_per_request"]
    assert smoke["ratio"] == pytest.approx(smoke["aiohttp_cpu_us_per_request"] / http1, abs=0.01)
    assert (smoke["requests_per_round"], smoke["rounds"]) == (100, 1)
