"""``python -m bench dra``: a smoke run at a tiny size, as a user would run it. Figures
are checked for presence and for the counts the shape fixes, never for speed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.bench.runner import run_bench


@pytest.fixture(scope="module")
def smoke() -> dict[str, Any]:
    args = ("--nodes", "8", "--pods", "4", "--rounds", "1")
    return run_bench("dra", *args, timeout=180).result


def test_every_figure_is_measured(smoke: dict[str, Any]) -> None:
    for key in (
        "allocate_free_node_us",
        "allocate_free_node_cold_us",
        "allocate_short_node_us",
        "allocate_held_node_us",
        "quickcheck_node_us",
        "gang_ms",
        "gang_filter_all_ms",
        "gang_exact_only_ms",
        "gang_cold_ms",
    ):
        assert smoke[key] > 0, key


def test_the_gang_is_placed_one_pod_per_node(smoke: dict[str, Any]) -> None:
    assert smoke["gang_pods_placed"] == 4
    # With the quick check only the first free node is tried; without it pod k tries
    # the k full nodes before it; a Filter over all nodes tries every node left free.
    assert smoke["gang_allocate_calls"] == 4
    assert smoke["gang_exact_only_allocate_calls"] == 1 + 2 + 3 + 4
    assert smoke["gang_filter_all_allocate_calls"] == 8 + 7 + 6 + 5


def test_a_node_one_gpu_short_is_searched_through(smoke: dict[str, Any]) -> None:
    # 8 wanted, 7 free: every subset of the 7 is one step (the empty one is the first).
    assert smoke["allocate_short_node_steps"] == 2**7
