"""The free-capacity search of ``troupe explain`` (``troupe.whatif.free``) and the fit
check on a cluster state in memory (the checked runs are end to end,
tests/integration/test_explain_free_e2e.py)."""

from __future__ import annotations

from typing import Any

from troupe.api.objects import Pod
from troupe.sim.snapshot_file import Snapshot
from troupe.whatif.diagnosis import Diagnosis, parse_diagnosis
from troupe.whatif.fit import Ask, capacity, needed
from troupe.whatif.free import Plan, budget_note, describe, priority_note, search
from troupe.whatif.state import ClusterState, Target

RACK = "example.com/rack"


def node(name: str, rack: str, cpu: str = "4", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {RACK: rack, "kubernetes.io/hostname": name}},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "pods": "110"}},
    }


def pod(name: str, cpu: str, node: str = "", priority: int = 0, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        "priority": priority,
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", **meta}, "spec": spec}


def member(i: int, node: str = "") -> dict[str, Any]:
    return pod(f"m-{i}", "3", node, 100, labels={"scheduling.x-k8s.io/pod-group": "g"})


def state(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> ClusterState:
    return ClusterState(Snapshot(resources={"nodes": nodes, "pods": pods}))


def diagnosis(
    min_count: int, placed: int = 0, level: str = RACK, *, quorum: bool = True
) -> Diagnosis:
    record: dict[str, Any] = {
        "quorum": {"minCount": min_count, "alreadyPlaced": placed, "fit": 0},
        "topology": {"required": level},
        "members": [],
        "preemption": {"result": "never", "message": ""},
    }
    if not quorum:
        record.pop("quorum")
    return parse_diagnosis(record)


def plans_for(s: ClusterState, target: Target, d: Diagnosis, pod: Pod | None) -> list[Plan]:
    """The search for one member of REQUEST, as ``troupe explain`` asks it."""
    return search(s, target, Ask(REQUEST, needed(d), d.required_level, pod))


GANG = Target("podgroup", "default", "g")
REQUEST = {"cpu": 3000}


def test_lower_priority_pods_first_even_if_more_of_them() -> None:
    s = state(
        [node("a1", "a"), node("a2", "a"), node("b1", "b"), node("b2", "b")],
        [
            pod("lo-a1-0", "2", "a1", 10), pod("lo-a1-1", "2", "a1", 10),
            pod("lo-a2-0", "2", "a2", 10), pod("lo-a2-1", "2", "a2", 10),
            pod("lo-b1", "4", "b1", 10), pod("hi-b2", "4", "b2", 1000),
            member(0), member(1),
        ],
    )  # fmt: skip
    plans = plans_for(s, GANG, diagnosis(2), None)
    assert [(p.value, len(p.pods)) for p in plans] == [("a", 4), ("b", 2)]
    assert describe(plans[0], REQUEST) == (
        "free 8 cpu in rack a (move 4 pods: default/lo-a1-0, default/lo-a1-1, "
        "default/lo-a2-0, default/lo-a2-1)"
    )
    assert priority_note(plans[0], 100, diagnosis(2)).endswith(
        "it did not: it is off for the target (preemptionPolicy: Never)"
    )
    assert priority_note(plans[1], 100, diagnosis(2)).startswith(
        "1 of the moved pods have priority >= the target's (100)"
    )


def test_one_big_pod_rather_than_two_small_and_never_the_gang_or_a_daemon() -> None:
    daemon = {"ownerReferences": [{"kind": "DaemonSet", "name": "ds", "uid": "1"}]}
    # 12 cpu, all taken: the placed member 3, a DaemonSet pod 2, two pods of 2, one of 3.
    s = state(
        [node("a1", "a", cpu="12")],
        [
            member(0, "a1"),  # placed before: never moved
            pod("ds", "2", "a1", 0, **daemon),
            pod("small-0", "2", "a1", 10), pod("small-1", "2", "a1", 10),
            pod("big", "3", "a1", 10),
            member(1),
        ],
    )  # fmt: skip
    (plan,) = plans_for(s, GANG, diagnosis(2, placed=1), None)
    assert [m.key for m in plan.pods] == ["default/big"]
    assert describe(plan, REQUEST) == "free 3 cpu in rack a (move 1 pod: default/big)"


def test_a_node_the_pod_may_not_use_is_neither_room_nor_freed() -> None:
    taint = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
    s = state(
        [node("n1", "a"), node("n2", "a", taints=[taint]), node("n3", "a", unschedulable=True)],
        [pod("x", "2", "n1", 10), pod("solo", "3", "", 100)],
    )
    target = Target("pod", "default", "solo")
    d = diagnosis(1, level="", quorum=False)
    solo = Pod.model_validate(s.members(target)[0])
    cap = capacity(s, Ask(REQUEST, 1, "", solo))
    notes = {r["node"]: r["note"] for r in cap["nodes"]}
    assert notes == {
        "n1": "",
        "n2": "taint dedicated=db:NoSchedule not tolerated",
        "n3": "cordoned",
    }
    assert cap["domains"][0]["excluded"] == 2 and cap["domains"][0]["fit"] == 0
    (plan,) = plans_for(s, target, d, solo)
    assert describe(plan, REQUEST) == "free 2 cpu on n1 (move 1 pod: default/x)"
    # Without the pod's filters the tainted node would look free (and need no move).
    assert plans_for(s, target, d, None) == []


def pdb(name: str, app: str, allowed: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}},
        "status": {"disruptionsAllowed": allowed},
    }


def with_budgets(s: ClusterState, *budgets: dict[str, Any]) -> ClusterState:
    s.snapshot.resources["poddisruptionbudgets"] = list(budgets)
    return s


def test_pods_a_budget_allows_no_disruption_of_are_left_when_others_free_the_room() -> None:
    # Rack a frees the room with one pod, rack b needs two; a's pod is protected.
    s = with_budgets(
        state(
            [node("a1", "a"), node("b1", "b"), node("b2", "b")],
            [
                pod("db-0", "4", "a1", 10, labels={"app": "db"}),
                pod("web-0", "2", "b1", 10),
                pod("web-1", "2", "b2", 10),
                pod("solo", "3", "", 100),
            ],
        ),
        pdb("db", "db", 0),
    )
    target = Target("pod", "default", "solo")
    d = diagnosis(1, level="", quorum=False)
    (plan,) = plans_for(s, target, d, None)
    assert [m.key for m in plan.pods] == ["default/web-0"]
    assert plan.over_budget() == {}


def test_a_plan_past_a_budget_is_ranked_last_and_says_so() -> None:
    s = with_budgets(
        state(
            [node("a1", "a"), node("b1", "b")],
            [
                pod("db-0", "4", "a1", 10, labels={"app": "db"}),
                pod("web-0", "2", "b1", 10, labels={"app": "web"}),
                pod("web-1", "2", "b1", 10, labels={"app": "web"}),
                member(0),
                member(1),
            ],
        ),
        pdb("db", "db", 0),
        pdb("web", "web", 2),
    )
    # Room for one member of 3 cpu: rack a by moving db-0 alone (its budget allows no
    # disruption), rack b by moving both web pods (their budget allows 2). Fewer pods
    # would pick a; the budget puts b first.
    plans = plans_for(s, GANG, diagnosis(1), None)
    assert [(p.value, [m.key for m in p.pods]) for p in plans] == [
        ("b", ["default/web-0", "default/web-1"]),
        ("a", ["default/db-0"]),
    ]
    assert plans[0].over_budget() == {} and budget_note(plans[0]) == ""
    assert plans[1].over_budget() == {"default/db": 1}
    assert budget_note(plans[1]) == (
        "moving them goes past PodDisruptionBudget default/db (allows 0, 1 more moved)"
    )
