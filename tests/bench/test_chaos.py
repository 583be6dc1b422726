"""``python -m bench chaos``: the seeded fault order, how the verdict reads room,
identities and who held the Lease when, and one quick run end to end (two ``troupe
run`` replicas, every fault kind at least once, the Lease edited three ways among
them): it must exit 0 with every invariant at 0."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
from typing import Any, cast

import pytest
from bench.chaos.lease import LEASES, Closure, LeaseTimeline, valid_holder
from bench.chaos.plan import FAULT_KINDS, fault_order
from bench.chaos.verdict import INVARIANTS, Room, fit_all, identity_of, ledger_verdict, requests
from bench.chaos.workload import pod
from troupe.sim.apiserver.harness.ledger import WriteLedger, WriteRecord
from troupe.sim.apiserver.registry.bootstrap import new_store

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


@pytest.mark.parametrize(
    ("spec", "holder"),
    [
        ({"holderIdentity": "a_1", "leaseDurationSeconds": 4}, "a_1"),
        ({"holderIdentity": "a_1", "leaseDurationSeconds": 0}, ""),
        ({"holderIdentity": "a_1", "leaseDurationSeconds": "abc"}, ""),
        ({"holderIdentity": "", "leaseDurationSeconds": 1}, ""),
    ],
    ids=["held", "duration 0 is nobody's", "unreadable is nobody's", "released"],
)
def test_who_validly_holds_a_lease(spec: dict[str, Any], holder: str) -> None:
    assert valid_holder({"spec": spec}) == holder


BIND_P = ("POST", "/api/v1/namespaces/chaos/pods/p/binding")
EVENT = ("POST", "/apis/events.k8s.io/v1/namespaces/chaos/events")


def lease_of(holder: str, duration: int = 4) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "troupe-chaos", "namespace": "kube-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration},
    }


def test_writes_after_the_lease_moved_are_late_only_if_sent_before_the_fence_closed() -> None:
    """a leads; the Lease is given to b; a's fence closes at 10.0 with one binding and
    one event on the wire. Judged: what a sent before 10.0 is late, what it sent after
    (or what a replica sent that never closed its fence) is a write without the Lease."""
    store = new_store()
    ledger = WriteLedger(store, "kube-system", "troupe-chaos")
    timeline = LeaseTimeline(store, ledger)

    def write(at: float, who: str, method: str, path: str) -> None:
        agent = f"troupe-scheduler/0 ({who})"
        ledger.writes.append(WriteRecord(at, method, path, agent, "", ""))

    store.create(LEASES, lease_of("a_1"))
    write(1.0, "a_1", *BIND_P)  # held
    moved = store.get(LEASES, "troupe-chaos", "kube-system")
    moved["spec"]["holderIdentity"] = "b_1"
    store.update(LEASES, moved)
    write(9.5, "a_1", "PATCH", "/api/v1/namespaces/chaos/pods/q/status")  # before 10.0
    write(10.2, "a_1", *BIND_P)  # on the wire at 10.0
    write(10.3, "a_1", *EVENT)  # on the wire at 10.0
    write(10.4, "a_1", *EVENT)  # a second one: sent after the closure
    write(10.5, "b_1", *EVENT)  # the new holder
    write(10.6, "c_1", *EVENT)  # never held it, never closed a fence
    write(10.7, "a_1", "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x")
    wire = (" ".join(BIND_P), " ".join(EVENT))
    verdict = ledger_verdict(
        ledger, set(), timeline, {"a_1": Closure("lease taken by another replica", 10.0, wire)}
    )
    timeline.stop()
    assert (verdict["writes"], verdict["late_writes"], verdict["writes_without_lease"]) == (7, 3, 2)
    assert verdict["lease_changes"] == 2
    assert [e.split(" while ")[0] for e in verdict["examples_without_lease"]] == [
        f"{' '.join(EVENT)} from a_1",
        f"{' '.join(EVENT)} from c_1",
    ]


def test_a_lease_of_duration_0_or_deleted_is_held_by_nobody_from_that_write_on() -> None:
    store = new_store()
    ledger = WriteLedger(store, "kube-system", "troupe-chaos")
    timeline = LeaseTimeline(store, ledger)
    store.create(LEASES, lease_of("a_1"))
    ledger.writes.append(WriteRecord(1.0, *BIND_P, "troupe-scheduler/0 (a_1)", "", ""))
    zero = store.get(LEASES, "troupe-chaos", "kube-system")
    zero["spec"]["leaseDurationSeconds"] = 0
    store.update(LEASES, zero)
    ledger.writes.append(WriteRecord(2.0, *EVENT, "troupe-scheduler/0 (a_1)", "", ""))
    store.delete(LEASES, "troupe-chaos", "kube-system")
    store.create(LEASES, lease_of("a_1"))
    timeline.stop()
    assert [timeline.holder_of(i) for i in range(3)] == ["a_1", "", "a_1"]
    verdict = ledger_verdict(ledger, set(), timeline, {})
    assert verdict["writes_without_lease"] == 1


@pytest.mark.parametrize(
    ("line", "closure"),
    [
        (
            {"msg": "lease deleted", "writesOnTheWire": ["POST /x"], "monotonicTime": 12.5},
            Closure("lease deleted", 12.5, ("POST /x",)),
        ),
        ({"msg": "caches synced, scheduling"}, None),
    ],
    ids=["a closure line", "any other line"],
)
def test_a_fence_closure_is_read_from_a_replica_log_line(
    line: dict[str, Any], closure: Closure | None
) -> None:
    assert Closure.of(line) == closure


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
    lease_faults = ("lease_deleted", "lease_stolen", "lease_zero_duration")
    assert result["lease_edit_exit_codes"] == {k: {"1": 1} for k in lease_faults}, result
    assert result["seconds"] < 180
