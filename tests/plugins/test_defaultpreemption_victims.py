"""DefaultPreemption's victim selection on one node (upstream SelectVictimsOnNode),
run against a real scheduler's filters, and the PDB split it relies on."""

from __future__ import annotations

import numpy as np
import pytest
from troupe.api.pdb import PodDisruptionBudget
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.plugins.defaultpreemption.victims import (
    NO_VICTIMS,
    NodeVictims,
    select_victims_on_node,
    split_by_pdb_violation,
)

from tests.plugins.builders import make_pod
from tests.plugins.preemption_helpers import SCHEDULER, harness, pdb, pending, running


def select(
    pods: list, preemptor: PodInfo, budgets: list[PodDisruptionBudget] | None = None
) -> NodeVictims | Status:
    h = harness()
    h.pods(pods)
    handle = h.parts.profiles[SCHEDULER]
    slot = handle.table.slot("n1")
    assert slot is not None
    return select_victims_on_node(handle, preemptor, slot, budgets or [])


def names(found: NodeVictims | Status) -> list[str]:
    assert isinstance(found, NodeVictims), found
    return [v.pod.metadata.name for v in found.victims]


@pytest.mark.parametrize(
    ("pods", "cpu", "expected"),
    [
        pytest.param(
            [running(f"low-{i}", "n1", priority=i) for i in range(4)],
            "2",
            ["low-1", "low-0"],
            id="a full node gives up only the two least important pods the preemptor needs",
        ),
        pytest.param(
            [
                running("a", "n1", priority=3),
                running("b", "n1", priority=1),
                running("c", "n1", priority=2),
            ],
            "2",
            ["b"],
            id="victims are reprieved from the most important down",
        ),
        pytest.param(
            [
                running("old", "n1", priority=1, started="2024-01-01T00:00:00Z"),
                running("new", "n1", priority=1, started="2024-06-01T00:00:00Z"),
                running("other", "n1", priority=1, started="2024-03-01T00:00:00Z"),
                running("big", "n1", cpu="1", priority=1, started="2023-01-01T00:00:00Z"),
            ],
            "1",
            ["new"],
            id="among equal priorities the pod that started last goes first",
        ),
        pytest.param(
            [running("hi", "n1", cpu="2", priority=500), running("lo", "n1", cpu="2", priority=1)],
            "2",
            ["lo"],
            id="pods of higher priority than the preemptor are never victims",
        ),
    ],
)
def test_victims_on_one_node(pods: list, cpu: str, expected: list[str]) -> None:
    assert names(select(pods, pending("p", cpu=cpu).info())) == expected


def test_a_node_with_no_lower_priority_pod_has_no_victims() -> None:
    found = select([running("peer", "n1", cpu="4", priority=100)], pending("p").info())
    assert found == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_VICTIMS,))


def test_a_node_too_small_even_when_emptied_says_why() -> None:
    pods = [running("hi", "n1", cpu="3", priority=500), running("lo", "n1", priority=1)]
    found = select(pods, pending("p", cpu="2").info())
    assert isinstance(found, Status)
    assert (found.code, found.reasons) == (Code.UNSCHEDULABLE, ("Insufficient cpu",))


def test_a_pod_that_would_break_a_budget_is_reprieved_before_the_others() -> None:
    pods = [
        running("guarded", "n1", priority=5).model_copy(deep=True),
        running("free", "n1", priority=1),
        running("filler", "n1", cpu="2", priority=900),
    ]
    pods[0].metadata.labels["app"] = "db"
    found = select(pods, pending("p", cpu="1").info(), [pdb("db", {"app": "db"})])
    # "free" is the less important pod anyway; "guarded" stays and breaks nothing.
    assert names(found) == ["free"]
    assert isinstance(found, NodeVictims) and found.pdb_violations == 0


def test_a_budget_breaking_victim_is_counted_when_it_must_go() -> None:
    guarded = running("guarded", "n1", priority=1)
    guarded.metadata.labels["app"] = "db"
    pods = [guarded, running("free", "n1", priority=5), running("filler", "n1", "2", 900)]
    found = select(pods, pending("p", cpu="2").info(), [pdb("db", {"app": "db"})])
    assert names(found) == ["free", "guarded"]
    assert isinstance(found, NodeVictims) and found.pdb_violations == 1


def test_selection_leaves_the_table_as_it_was() -> None:
    h = harness()
    h.pods([running(f"low-{i}", "n1", priority=i) for i in range(4)])
    handle = h.parts.profiles[SCHEDULER]
    table = handle.table
    slot = table.slot("n1")
    assert slot is not None
    requested, pods = table.requested.copy(), set(table.pods[slot])
    found = select_victims_on_node(handle, pending("p", cpu="3").info(), slot, [])
    assert len(names(found)) == 3
    assert np.array_equal(table.requested, requested) and set(table.pods[slot]) == pods


def test_a_higher_priority_nominated_pod_keeps_its_room_during_selection() -> None:
    h = harness()
    h.pods([running(f"low-{i}", "n1", priority=i) for i in range(4)])
    nominee = pending("nominee", cpu="2", priority=1000).nominated("n1").info()
    h.scheduler.queue.add_nominated(nominee, "n1")
    handle = h.parts.profiles[SCHEDULER]
    slot = handle.table.slot("n1")
    assert slot is not None
    # 2 cpu for the nominee, 2 for the preemptor: every low pod must go.
    found = select_victims_on_node(handle, pending("p", cpu="2").info(), slot, [])
    assert sorted(names(found)) == ["low-0", "low-1", "low-2", "low-3"]


def labelled(name: str, **labels: str) -> PodInfo:
    return make_pod().name(name).labels(labels).info()


@pytest.mark.parametrize(
    ("budgets", "violating"),
    [
        pytest.param([pdb("x", {"app": "a"}, allowed=0)], ["a1", "a2"], id="no disruption allowed"),
        pytest.param(
            [pdb("x", {"app": "a"}, allowed=1)], ["a2"], id="one allowed: the second pod breaks it"
        ),
        pytest.param(
            [pdb("x", {"app": "a"}, allowed=0, a1="2024-01-01T00:00:00Z")],
            ["a2"],
            id="a pod the budget already lists as disrupted spends nothing",
        ),
        pytest.param(
            [pdb("x", {"app": "a"}, namespace="other")], [], id="a budget in another namespace"
        ),
        pytest.param([pdb("x", {})], [], id="a budget with an empty selector covers nothing"),
    ],
)
def test_pdb_split(budgets: list[PodDisruptionBudget], violating: list[str]) -> None:
    pods = [labelled("a1", app="a"), labelled("a2", app="a"), labelled("b", app="b")]
    bad, good = split_by_pdb_violation(pods, budgets)
    assert [p.pod.metadata.name for p in bad] == violating
    assert [p.pod.metadata.name for p in good] == [
        p.pod.metadata.name for p in pods if p.pod.metadata.name not in violating
    ]
