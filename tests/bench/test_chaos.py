"""``python -m bench chaos``: the seeded fault order, how the verdict reads room and
identities, and one quick run end to end (two ``troupe run`` replicas, every fault
kind at least once): it must exit 0 with every invariant at 0."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
from typing import Any, cast

import pytest
from bench.chaos.plan import FAULT_KINDS, fault_order
from bench.chaos.verdict import INVARIANTS, Room, fit_all, identity_of, requests
from bench.chaos.workload import pod

from tests.bench.runner import ROOT

QUICK_SEED = 1


def test_the_fault_order_has_every_kind_repeats_times_and_follows_the_seed() -> None:
    order = fault_order(FAULT_KINDS, 3, random.Random(7))
    assert sorted(order) == sorted(FAULT_KINDS * 3)
    assert all(a != b for a, b in itertools.pairwise(order))
    assert order == fault_order(FAULT_KINDS, 3, random.Random(7))
    assert order != fault_order(FAULT_KINDS, 3, random.Random(8))


@pytest.mark.parametrize(
    ("agent", "identity"),
    [
        ("troupe-scheduler/0.1.0 (a_6f1c)", "a_6f1c"),
        ("troupe-scheduler", ""),
    ],
    ids=["troupe run names its lease identity", "no identity"],
)
def test_the_identity_is_the_user_agent_comment(agent: str, identity: str) -> None:
    assert identity_of(agent) == identity


@pytest.mark.parametrize(
    ("cpu", "memory", "expected"),
    [
        ("100m", "128Mi", (100, 128 * 2**20)),
        ("1x", "64Mi", None),
        ("-500m", "64Mi", (0, 64 * 2**20)),
    ],
    ids=["parses", "does not parse", "negative counts as nothing"],
)
def test_requests(cpu: str, memory: str, expected: tuple[int, int] | None) -> None:
    assert requests(pod("p", cpu, memory, "plain")) == expected


@pytest.mark.parametrize(
    ("needs", "fits"),
    [
        ([(1000, 0)] * 4, True),
        ([(1000, 0)] * 5, False),
        ([(1500, 0), (1500, 0), (500, 0)], True),
        ([(2500, 0)], False),
    ],
    ids=["four fill two nodes", "a fifth does not", "largest first", "too big for any node"],
)
def test_a_gang_fits_only_whole(needs: list[tuple[int, int]], fits: bool) -> None:
    room = {"n1": Room(2000, 2**30, 10), "n2": Room(2000, 2**30, 10)}
    assert fit_all(room, needs) is fits
    assert room["n1"].cpu == 2000, "the room given is left as it was"


@pytest.fixture(scope="module")
def quick_run() -> tuple[int, dict[str, Any], str]:
    run = subprocess.run(
        [sys.executable, "-m", "bench", "chaos", "--quick", "--seed", str(QUICK_SEED)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = run.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    return run.returncode, cast(dict[str, Any], result), run.stdout[-3000:] + run.stderr[-3000:]


def test_a_quick_run_keeps_every_invariant(quick_run: tuple[int, dict[str, Any], str]) -> None:
    code, result, output = quick_run
    assert code == 0, output
    assert {k: result[k] for k in INVARIANTS} == dict.fromkeys(INVARIANTS, 0), output
    assert result["settled"] is True


def test_a_quick_run_injects_every_fault_kind(quick_run: tuple[int, dict[str, Any], str]) -> None:
    _, result, output = quick_run
    injected = result["faults_injected"]
    assert set(injected) == set(FAULT_KINDS), output
    assert all(n >= 1 for n in injected.values()), injected
    # The faults met what they aimed at: bursts hit requests, kills landed mid-way.
    assert all(n > 0 for n in result["fault_requests_hit"].values()), result
    assert result["faults_missed_moment"] == {}, result
    assert result["paused_leader_exit_codes"] == {"1": 1}, "the paused leader fenced itself"
    assert result["seconds"] < 180
