"""The scenario runner's bookkeeping: gang outcomes from pod events, what counts as a
change for settling, the summary tables, and gang steps played on an embedded cluster
(no scheduler: nothing gets bound)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.clock import FakeClock
from troupe.cli.render import render_summary
from troupe.sim.apiserver.registry.binding import bind
from troupe.sim.cluster import SimCluster
from troupe.sim.manifests import GANG_KINDS, gang_manifests, pod_manifests
from troupe.sim.nodespec import RACK_LABEL, ZONE_LABEL, NodeSpec
from troupe.sim.runner import GangOutcome, GangRow, ScenarioRunner, Summary, Tracker
from troupe.sim.scenario import GangStep, PodsStep, ScenarioError, TopologySpec, load_scenario

NOT_MEET = "CoschedulingNotMeetMinMember"
UNSCHEDULABLE = "Unschedulable"


class FakeStore:
    """Pod objects as the store would send them: each event carries the pod's whole
    state so far (a node once bound, the last condition), like a watch does."""

    def __init__(self, tracker: Tracker, namespace: str = "default") -> None:
        self.tracker = tracker
        self.namespace = namespace
        self.pods: dict[str, dict[str, Any]] = {}

    def _send(self, name: str, type_: str = "MODIFIED") -> None:
        self.tracker.on_pod(type_, self.pods[name])

    def pod(self, name: str) -> dict[str, Any]:
        return self.pods.setdefault(
            name,
            {
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {},
                "status": {"phase": "Pending"},
            },
        )

    def reject(self, name: str, reason: str, message: str) -> None:
        condition = {"type": "PodScheduled", "status": "False", "reason": reason}
        self.pod(name)["status"]["conditions"] = [{**condition, "message": message}]
        self._send(name)

    def bind(self, name: str, node: str = "node-0") -> None:
        self.pod(name)["spec"]["nodeName"] = node
        self._send(name)

    def run(self, name: str, phase: str = "Running") -> None:
        status = self.pod(name)["status"]
        status["phase"] = phase
        status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
        self._send(name)

    def delete(self, name: str) -> None:
        self._send(name, "DELETED")


def gang(tracker: Tracker, size: int, min_member: int | None = None, name: str = "g") -> GangStep:
    step = GangStep(name=name, size=size, min_member=min_member)
    tracker.add_gang(step, gang_manifests(step))
    return step


def one_row(tracker: Tracker, start: float = 0.0) -> GangRow:
    (row,) = tracker.summary("t", start).gangs
    return row


MESSAGE = "gang default/g: 2 of 3 required pods fit; 0/3 nodes are available: 1 Insufficient cpu."

# (size, minMember, actions on pods g-<i>, outcome, bound, reason of the row)
CASES = [
    pytest.param(
        3,
        None,
        [("reject", 0, NOT_MEET), ("reject", 1, NOT_MEET), ("reject", 2, UNSCHEDULABLE)],
        GangOutcome.PENDING,
        0,
        UNSCHEDULABLE,
        id="a gang none of whose pods got a node is pending, with the last reason seen",
    ),
    pytest.param(
        3,
        None,
        [("bind", 0, ""), ("bind", 1, ""), ("bind", 2, "")],
        GangOutcome.SCHEDULED,
        3,
        "",
        id="a gang bound whole is scheduled",
    ),
    pytest.param(
        4,
        3,
        [("bind", 0, ""), ("bind", 1, ""), ("bind", 2, "")],
        GangOutcome.SCHEDULED,
        3,
        "",
        id="a gang with its quorum bound but not every member is scheduled",
    ),
    pytest.param(
        4,
        None,
        [("bind", 0, ""), ("bind", 1, "")],
        GangOutcome.PARTIAL,
        2,
        "",
        id="a gang bound below its minMember is partial",
    ),
    pytest.param(
        2,
        None,
        [("bind", 0, ""), ("bind", 1, ""), ("Succeeded", 0, ""), ("Succeeded", 1, "")],
        GangOutcome.COMPLETED,
        2,
        "",
        id="a gang whose every member succeeded is completed",
    ),
    pytest.param(
        2,
        None,
        [("bind", 0, ""), ("bind", 1, ""), ("Succeeded", 0, ""), ("Running", 1, "")],
        GangOutcome.SCHEDULED,
        2,
        "",
        id="a gang with a member still running is scheduled, not completed",
    ),
    pytest.param(
        2,
        None,
        [("reject", 0, NOT_MEET), ("reject", 1, NOT_MEET), ("bind", 0, ""), ("bind", 1, "")],
        GangOutcome.SCHEDULED,
        2,
        NOT_MEET,
        id="a gang that waited and was then bound is scheduled and keeps why it waited",
    ),
    pytest.param(
        2,
        None,
        [("bind", 0, ""), ("delete", 0, ""), ("bind", 1, "")],
        GangOutcome.SCHEDULED,
        2,
        "",
        id="a member bound then deleted (its node removed) still counts as bound",
    ),
]


@pytest.mark.parametrize(("size", "min_member", "actions", "outcome", "bound", "reason"), CASES)
def test_gang_outcome_from_pod_events(
    size: int,
    min_member: int | None,
    actions: list[tuple[str, int, str]],
    outcome: GangOutcome,
    bound: int,
    reason: str,
) -> None:
    tracker = Tracker(FakeClock())
    gang(tracker, size, min_member)
    store = FakeStore(tracker)
    for action, i, why in actions:
        name = f"g-{i}"
        if action == "reject":
            store.reject(name, why, MESSAGE)
        elif action == "bind":
            store.bind(name)
        elif action == "delete":
            store.delete(name)
        else:
            store.run(name, action)
    row = one_row(tracker)
    assert (row.outcome, row.bound, row.reason) == (outcome, bound, reason)
    assert row.min_member == (size if min_member is None else min_member)
    assert row.message == (MESSAGE if reason else "")


def test_a_pending_gang_counts_its_pods_reasons() -> None:
    tracker = Tracker(FakeClock())
    gang(tracker, 4)
    store = FakeStore(tracker)
    for i, why in enumerate([NOT_MEET, NOT_MEET, UNSCHEDULABLE]):
        store.reject(f"g-{i}", why, MESSAGE)
    assert one_row(tracker).pod_reasons == (
        (NOT_MEET, 2),
        (UNSCHEDULABLE, 1),
        ("not attempted yet", 1),
    )


def test_times_are_seconds_from_the_start_of_the_run() -> None:
    clock = FakeClock(start=100.0)
    tracker = Tracker(clock)
    clock.advance(1.0)
    gang(tracker, 2)
    store = FakeStore(tracker)
    clock.advance(2.0)
    store.bind("g-0")
    clock.advance(0.25)
    store.bind("g-1")
    clock.advance(2.0)
    store.run("g-0", "Succeeded")
    clock.advance(0.5)
    store.run("g-1", "Succeeded")
    row = one_row(tracker, start=100.0)
    assert (row.submitted, row.first_bound, row.last_bound, row.finished) == (1.0, 3.0, 3.25, 5.75)


@pytest.mark.parametrize(
    ("second", "changes"),
    [
        pytest.param(
            lambda s: s.reject("g-0", NOT_MEET, MESSAGE),
            False,
            id="the same rejection again is no change (a gang that never fits still settles)",
        ),
        pytest.param(
            lambda s: s.reject("g-0", NOT_MEET, MESSAGE + " more"),
            True,
            id="a new scheduling message is a change",
        ),
        pytest.param(lambda s: s.bind("g-0"), True, id="a binding is a change"),
        pytest.param(lambda s: s.run("g-0"), True, id="a new phase is a change"),
    ],
)
def test_what_counts_as_a_change_for_settling(second: Any, changes: bool) -> None:
    clock = FakeClock()
    tracker = Tracker(clock)
    gang(tracker, 2)
    store = FakeStore(tracker)
    store.reject("g-0", NOT_MEET, MESSAGE)
    first = tracker.last_change
    clock.advance(1.0)
    second(store)
    assert (tracker.last_change > first) is changes


def test_gang_pods_stay_out_of_the_plain_pods_table_but_count_in_the_totals() -> None:
    tracker = Tracker(FakeClock())
    gang(tracker, 2)
    tracker.add_pods("web", pod_manifests(PodsStep(name="web", count=2)))
    store = FakeStore(tracker)
    store.bind("web-0")
    store.reject("web-1", UNSCHEDULABLE, "0/3 nodes are available: 3 Insufficient cpu.")
    store.reject("g-0", NOT_MEET, MESSAGE)
    summary = tracker.summary("t", 0.0)
    assert (summary.pods, summary.scheduled, summary.pending) == (4, 1, 3)
    assert summary.per_app == [("web", 2, 1)]
    assert summary.pending_reasons == [("0/3 nodes are available: 3 Insufficient cpu.", 1)]
    assert [g.name for g in summary.gangs] == ["g"]


NODE_LABELS = {
    "n0": {ZONE_LABEL: "a", RACK_LABEL: "a-r0"},
    "n1": {ZONE_LABEL: "a", RACK_LABEL: "a-r1"},
    "n2": {ZONE_LABEL: "a"},
}


@pytest.mark.parametrize(
    ("topology", "nodes", "domains", "shown"),
    [
        pytest.param(
            TopologySpec(required=RACK_LABEL),
            ["n0", "n0"],
            ((RACK_LABEL, ("a-r0",)),),
            f"{RACK_LABEL}=a-r0",
            id="a gang in one rack names it",
        ),
        pytest.param(
            TopologySpec(required=ZONE_LABEL, preferred=[RACK_LABEL]),
            ["n1", "n0"],
            ((ZONE_LABEL, ("a",)), (RACK_LABEL, ("a-r0", "a-r1"))),
            f"{ZONE_LABEL}=a {RACK_LABEL}=a-r0+a-r1",
            id="a gang over two racks of its zone names both, each level in turn",
        ),
        pytest.param(
            TopologySpec(required=RACK_LABEL),
            ["n2", None],
            ((RACK_LABEL, ("",)),),
            f"{RACK_LABEL}=<none>",
            id="a node without the label",
        ),
        pytest.param(
            TopologySpec(required=RACK_LABEL),
            [None, None],
            ((RACK_LABEL, ()),),
            f"{RACK_LABEL}=-",
            id="nothing bound yet",
        ),
        pytest.param(None, ["n0", "n1"], (), "", id="no topology: no domain"),
    ],
)
def test_a_gang_row_names_the_domains_its_members_were_bound_in(
    topology: TopologySpec | None, nodes: list[str | None], domains: Any, shown: str
) -> None:
    seen: list[str] = []

    def labels(node: str) -> dict[str, str]:
        seen.append(node)
        return NODE_LABELS.get(node, {})

    tracker = Tracker(FakeClock(), labels)
    step = GangStep(name="g", size=len(nodes), topology=topology)
    tracker.add_gang(step, gang_manifests(step))
    store = FakeStore(tracker)
    for i, node in enumerate(nodes):
        if node is not None:
            store.bind(f"g-{i}", node)
    # The labels are read once per binding, at the binding (the node may go later).
    assert seen == ([n for n in nodes if n is not None] if topology else [])
    row = one_row(tracker)
    assert (row.domains, row.domain) == (domains, shown)
    text = render_summary(summary_with(row))
    header = next(line for line in text.splitlines() if line.startswith("gang "))
    assert header.split()[-1] == "domain"
    line = next(line for line in text.splitlines() if line.startswith("g "))
    # Without topology the row ends at "finished" (nothing finished: "-").
    assert line.endswith(f"  {shown}" if shown else "  -")


# Each pod's own history, in order: rejected, then bound, then running, then done.
HISTORY = ("reject", "bind", "Running", "Succeeded")


@settings(max_examples=150, deadline=None)
@given(data=st.data(), size=st.integers(1, 5))
def test_a_gang_row_depends_on_each_pods_history_not_on_how_they_interleave(
    data: st.DataObject, size: int
) -> None:
    min_member = data.draw(st.integers(1, size), label="minMember")
    lengths = data.draw(st.lists(st.integers(0, 4), min_size=size, max_size=size))
    rows = []
    for _ in range(2):
        tracker = Tracker(FakeClock())
        gang(tracker, size, min_member)
        store = FakeStore(tracker)
        left = {i: list(HISTORY[:n]) for i, n in enumerate(lengths) if n}
        while left:
            i = data.draw(st.sampled_from(sorted(left)))
            step = left[i].pop(0)
            if not left[i]:
                del left[i]
            if step == "reject":
                store.reject(f"g-{i}", NOT_MEET, MESSAGE)
            elif step == "bind":
                store.bind(f"g-{i}")
            else:
                store.run(f"g-{i}", step)
        rows.append(one_row(tracker))
    first, second = ((r.bound, r.succeeded, r.outcome, r.pod_reasons) for r in rows)
    assert first == second
    bound = sum(1 for n in lengths if n >= 2)
    assert rows[0].bound == bound
    assert (rows[0].outcome is GangOutcome.PARTIAL) == (0 < bound < min_member)


def summary_with(*gangs: GangRow) -> Summary:
    return Summary(
        scenario="t",
        seconds=1.0,
        pods=0,
        scheduled=0,
        succeeded=0,
        pending=0,
        pending_reasons=[],
        per_app=[],
        pods_per_second=0.0,
        gangs=list(gangs),
        nodes=3,
        capacity={"cpu": "12", "nvidia.com/gpu": "8"},
    )


def row(outcome: GangOutcome, bound: int, message: str = "", **extra: Any) -> GangRow:
    fields: dict[str, Any] = {
        "name": "train",
        "namespace": "default",
        "api": "podgroup",
        "size": 4,
        "min_member": 4,
        "requests": "1 cpu, 128Mi, 2 gpu",
        "bound": bound,
        "succeeded": 0,
        "outcome": outcome,
        "submitted": 0.5,
        "first_bound": 1.0 if bound else None,
        "last_bound": 1.25 if bound else None,
        "finished": None,
        "reason": NOT_MEET if message else "",
        "message": message,
        **extra,
    }
    return GangRow(**fields)


@pytest.mark.parametrize(
    ("gang_row", "shown", "not_shown"),
    [
        pytest.param(
            row(GangOutcome.SCHEDULED, 4),
            ["Gangs:", "train", "podgroup", "1 cpu, 128Mi, 2 gpu", "scheduled", "1.0-1.2s"],
            ["Pending gangs", "!!"],
            id="a scheduled gang is a row with when it was bound and no reason",
        ),
        pytest.param(
            row(GangOutcome.PENDING, 0, MESSAGE, pod_reasons=((NOT_MEET, 4),)),
            ["pending", "Pending gangs", f"train  {MESSAGE}", f"pods: 4 {NOT_MEET}"],
            ["!!"],
            id="a pending gang says why, with its pods' reasons",
        ),
        pytest.param(
            row(GangOutcome.PENDING, 0, "gang default/train: " + "x " * 200),
            ["gang default/train: x x", "x..."],
            ["x " * 100],
            id="a long reason is cut",
        ),
        pytest.param(
            row(GangOutcome.PARTIAL, 2),
            ["PARTIAL!", "!! gang default/train is partly bound: 2 of minMember 4"],
            [],
            id="a partly bound gang is shouted about",
        ),
    ],
)
def test_the_gangs_table(gang_row: GangRow, shown: list[str], not_shown: list[str]) -> None:
    text = render_summary(summary_with(gang_row))
    assert "on 3 nodes (12 cpu, 8 nvidia.com/gpu)" in text
    for part in shown:
        assert part in text
    for part in not_shown:
        assert part not in text


@pytest.mark.parametrize("api", list(GANG_KINDS))
async def test_a_gang_step_creates_its_group_object_and_members_in_the_cluster(api: str) -> None:
    scenario = load_scenario(
        {
            "steps": [{"gang": {"name": "train", "size": 3, "api": api, "namespace": "ml"}}],
            "settleSeconds": 0.1,
        }
    )
    async with SimCluster([NodeSpec(count=1)]) as cluster:
        summary = await ScenarioRunner(cluster, scenario).run()
        assert cluster.store.get(GANG_KINDS[api], "train", "ml")["metadata"]["name"] == "train"
        pods = cluster.store.list("pods", namespace="ml")
    assert sorted(p["metadata"]["name"] for p in pods) == ["train-0", "train-1", "train-2"]
    (gang_row,) = summary.gangs
    assert (gang_row.outcome, gang_row.pod_reasons) == (
        GangOutcome.PENDING,
        (("not attempted yet", 3),),
    )
    assert summary.nodes == 1 and summary.capacity["cpu"] == "32"


async def test_a_gang_of_an_api_the_cluster_does_not_serve_is_a_scenario_error() -> None:
    scenario = load_scenario({"steps": [{"gang": {"name": "train", "size": 1}}]})
    async with SimCluster([NodeSpec(count=1)], install_crds=False) as cluster:
        with pytest.raises(ScenarioError, match=r"does not serve podgroups\.scheduling\.x-k8s\.io"):
            await ScenarioRunner(cluster, scenario).run()


async def test_a_topology_gang_step_is_accepted_by_the_cluster_and_names_its_rack() -> None:
    """The API server accepts the group objects; the runner reads the node's labels
    when a member is bound (by hand here: no scheduler runs)."""
    ring = {"name": "ring", "size": 2, "api": "podgroup", "topology": {"required": RACK_LABEL}}
    job = {
        "name": "job",
        "size": 1,
        "topology": {"required": ZONE_LABEL, "preferred": [RACK_LABEL]},
    }
    scenario = load_scenario({"steps": [{"gang": ring}, {"gang": job}]})
    async with SimCluster([NodeSpec(count=2, zones=("zone-a",), racks=2)]) as cluster:
        runner = ScenarioRunner(cluster, scenario)
        stop = cluster.store.listen("pods", runner.tracker.on_pod)
        for step in scenario.steps:
            runner._apply(step)
        group = cluster.store.get(GANG_KINDS["podgroup"], "ring", "default")
        assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK_LABEL}]}
        for i, node in enumerate(cluster.node_names):
            bind(cluster.store, "default", f"ring-{i}", {"target": {"name": node}})
        stop()
    rows = {g.name: g for g in runner.tracker.summary("t", 0.0).gangs}
    assert rows["ring"].domain == f"{RACK_LABEL}=zone-a-r0+zone-a-r1"
    assert rows["job"].domain == f"{ZONE_LABEL}=- {RACK_LABEL}=-"
