"""Delayed, workload-aware preemption for gangs (KEP-5710) through the pod-group cycle of
an in-process scheduler: what is evicted, nominated, counted, and what never is."""

from __future__ import annotations

from troupe.api.cycle import CycleState
from troupe.api.framework import DisruptionPlan
from troupe.api.gangs import POD_GROUP_LABEL, GangApi
from troupe.api.objects import Pod
from troupe.api.status import Status
from troupe.plugins.registry import PluginSpec, default_registry
from troupe.scheduler.observe.metrics import SchedulerMetrics

from tests.plugins.preemption_helpers import node, pending, running
from tests.scheduler.gang_helpers import coscheduling_group
from tests.scheduler.harness import Harness

NODES = ["n1", "n2", "n3", "n4"]


def filler(priorities: dict[str, int] | None = None) -> list[Pod]:
    """Four 1-cpu running pods on each 4-cpu node; on node n pod i has priority i
    unless ``priorities`` gives the node one priority for all its pods."""
    return [
        running(f"{n}-{i}", n, priority=(priorities or {}).get(n, i))
        for n in NODES
        for i in range(4)
    ]


def gang(name: str = "g", size: int = 4, cpu: str = "2", priority: int = 100) -> list[Pod]:
    return [
        pending(f"{name}-{i}", cpu=cpu, priority=priority).label(POD_GROUP_LABEL, name).obj()
        for i in range(size)
    ]


def setup(
    pods: list[Pod], metrics: SchedulerMetrics | None = None, h: Harness | None = None
) -> Harness:
    h = h or Harness(metrics=metrics)
    h.nodes([node(n).obj() for n in NODES]).pods(pods)
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("g", 4))
    return h


def sample(metrics: SchedulerMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def test_a_high_priority_gang_of_4_on_a_full_cluster_evicts_what_it_needs_and_binds() -> None:
    metrics = SchedulerMetrics.for_process()
    pods = filler()
    h = setup(pods, metrics)
    h.pods(gang())
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    # 8 cpu for 4 members of 2 cpu: the two least important pods of every node go.
    victims = sorted(f"default/{n}-{i}" for n in NODES for i in (0, 1))
    assert sorted(h.client.deletions) == victims
    assert h.client.bindings == []
    nominated = {f"default/g-{i}": h.client.nominations.get(f"default/g-{i}") for i in range(4)}
    assert sorted(nominated.values()) == NODES  # type: ignore[type-var]
    assert h.client.conditions["default/g-0"].message.endswith(
        "preemption: 8 lower-priority pod(s) are being evicted to make room for the gang"
    )
    notes = {e.note for e in h.client.events if e.reason == "Preempted"}
    assert notes == {f"Preempted by pod group default/g on node {n}" for n in NODES}
    assert sample(metrics, "scheduler_podgroup_preemption_attempts_total", result="preempted") == 1
    assert sample(metrics, "scheduler_podgroup_preemption_victims_count") == 1
    assert sample(metrics, "scheduler_podgroup_preemption_victims_sum") == 8
    assert (
        sample(
            metrics,
            "scheduler_podgroup_schedule_attempts_total",
            result="waiting_on_preemption",
            profile="troupe-scheduler",
            type="podgroup",
        )
        == 1
    )
    # Retried while the victims are still terminating: no second preemption.
    await h.advance(400)
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    assert sorted(h.client.deletions) == victims
    assert sample(metrics, "scheduler_podgroup_preemption_attempts_total", result="preempted") == 1
    # The victims are gone: the gang binds whole on the nodes nominated to it (its
    # identical members may swap them: the gang's own room is not held from itself).
    for pod in pods:
        if pod.key in victims:
            h.handlers.on_pod_delete(pod)
    await h.advance(10)
    await h.settle()
    assert set(dict(h.client.bindings)) == set(nominated)
    assert sorted(dict(h.client.bindings).values()) == sorted(nominated.values())  # type: ignore[type-var]
    await h.close()


async def test_a_gang_is_held_to_its_nominated_nodes_while_its_victims_terminate() -> None:
    # n5 (8 cpu) is full of pods the gang may not evict; the gang evicts on n1-n4.
    # Then n5's pods finish before any victim is gone: the gang could bind there whole,
    # but the victims on n1-n4 would then have been evicted for nothing. It waits for
    # them, for at most their grace period (30 s by default) and 30 s more.
    h = Harness()
    keepers = [running(f"n5-{i}", "n5", cpu="2", priority=1000) for i in range(4)]
    h.nodes([node(n).obj() for n in NODES] + [node("n5", cpu="8").obj()])
    h.pods(filler() + keepers)
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("g", 4))
    h.pods(gang())
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    assert len(h.client.deletions) == 8
    for pod in keepers:
        h.handlers.on_pod_delete(pod)
    await h.advance(10)
    await h.settle()
    assert h.client.bindings == []
    assert h.client.conditions["default/g-0"].message == (
        "gang default/g: 0 of 4 required pods fit; on the node its gang's preemption "
        "nominated: no room there yet (NodeResourcesFit); preemption: waiting for 8 "
        "preempted pod(s) to terminate"
    )
    # The hold has run out and the victims are still there: n5 it is.
    await h.advance(400)
    await h.settle()
    assert sorted(dict(h.client.bindings).values()) == ["n5"] * 4
    assert len(h.client.deletions) == 8
    await h.close()


async def test_a_deleted_gang_s_preemption_is_not_kept_past_its_hold() -> None:
    h = setup(filler())
    members = gang()
    h.pods(members)
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    preemption = h.parts.group_cycle.algorithm.preemption
    assert len(h.client.deletions) == 8 and preemption.kept == 1
    # The gang goes before it binds, and so do its victims.
    for pod in members:
        h.handlers.on_pod_delete(pod)
    h.handlers.on_group_delete(GangApi.COSCHEDULING, coscheduling_group("g", 4))
    for pod in filler():
        if pod.key in h.client.deletions:
            h.handlers.on_pod_delete(pod)
    await h.advance(100)
    await h.settle()
    assert preemption.kept == 1  # nobody asked about it since
    # The next gang admitted sweeps it away.
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("small", 2))
    h.pods(gang("small", size=2, cpu="1"))
    await h.settle()
    assert len(h.client.bindings) == 2
    assert preemption.kept == 0
    await h.close()


async def test_a_gang_that_cannot_fit_even_with_every_victim_gone_evicts_nothing() -> None:
    metrics = SchedulerMetrics.for_process()
    h = setup(filler(), metrics)
    h.pods(gang(cpu="5"))
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    assert h.client.deletions == []
    assert h.client.bindings == []
    assert h.client.nominations == {}
    assert h.client.conditions["default/g-0"].message.endswith(
        "preemption: evicting every lower-priority pod would still leave 4 of 4 required "
        "members without room"
    )
    assert (
        sample(metrics, "scheduler_podgroup_preemption_attempts_total", result="unschedulable") == 1
    )
    assert sample(metrics, "scheduler_podgroup_preemption_victims_count") == 0
    await h.close()


async def test_a_gang_never_evicts_pods_of_equal_or_higher_priority() -> None:
    pods = filler({"n1": 0, "n2": 0, "n3": 100, "n4": 200})
    h = setup(pods)
    h.pods(gang())
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    # Two members on each of n1 and n2: all their pods go, none of n3's or n4's.
    assert sorted(h.client.deletions) == sorted(
        f"default/n{n}-{i}" for n in (1, 2) for i in range(4)
    )
    await h.close()


async def test_a_gang_that_would_need_equal_priority_pods_evicted_evicts_nothing() -> None:
    h = setup(filler({"n1": 0, "n2": 100, "n3": 100, "n4": 200}))
    h.pods(gang())
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    assert h.client.deletions == []
    await h.close()


async def test_members_of_a_lower_priority_gang_are_victims_one_by_one_in_single_mode() -> None:
    old = [
        running(f"old-{n}-{i}", n, priority=0).model_copy(deep=True)
        for n in NODES
        for i in range(4)
    ]
    for pod in old:
        pod.metadata.labels[POD_GROUP_LABEL] = "old"
    h = Harness()
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("old", 16))
    setup(old, h=h)
    h.pods(gang())
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    # A scheduler-plugins PodGroup has no disruption mode: its members are disrupted
    # one by one (KEP-5710 ``single``), at the group's priority (its members' here).
    assert len(h.client.deletions) == 8
    assert all(key.startswith("default/old-") for key in h.client.deletions)
    await h.close()


class RefuseDisruption:
    """A PermitDisruption plugin that refuses every plan and remembers it."""

    name = "RefuseDisruption"

    def __init__(self) -> None:
        self.plans: list[DisruptionPlan] = []

    def permit_disruption(self, state: CycleState, plan: DisruptionPlan) -> Status:
        self.plans.append(plan)
        return Status.unschedulable("the quota forbids it")


async def test_a_permit_disruption_plugin_rejecting_the_plan_evicts_nothing() -> None:
    refuse = RefuseDisruption()
    registry = default_registry()
    registry.register(PluginSpec(refuse.name, lambda a, h: refuse, None, RefuseDisruption))
    plugins = {"permitDisruption": {"enabled": [{"name": refuse.name}]}}
    metrics = SchedulerMetrics.for_process()
    h = setup(
        filler(),
        h=Harness({"profiles": [{"plugins": plugins}]}, registry=registry, metrics=metrics),
    )
    h.pods(gang())
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    assert h.client.deletions == []
    assert h.client.nominations == {}
    # It was asked once, about the whole gang's plan.
    (plan,) = refuse.plans
    assert len(plan.victims) == 8 and sorted(plan.nominated) == [f"default/g-{i}" for i in range(4)]
    assert h.client.conditions["default/g-0"].message.endswith(
        "preemption refused: the quota forbids it"
    )
    assert sample(metrics, "scheduler_podgroup_preemption_attempts_total", result="rejected") == 1
    await h.close()


async def test_a_second_gang_counts_the_first_gang_s_terminating_victims_as_gone() -> None:
    # Gang a evicts one 1-cpu pod per node and is nominated there. Its victims are
    # terminating (deletion begun, still on the nodes) when gang b, as important,
    # preempts: b must leave a's room alone and needs one more pod per node. Counting
    # a's victims as still there beside a's nominated members would evict two per node.
    pods = filler()
    h = setup(pods)
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("a", 4))
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("b", 4))
    h.pods(gang("a", cpu="1"))
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    first = sorted(h.client.deletions)
    assert len(first) == 4
    for pod in pods:
        if pod.key in first:
            leaving = pod.model_copy(deep=True)
            leaving.metadata.deletion_timestamp = "2024-01-01T00:10:00Z"
            h.handlers.on_pod_update(pod, leaving)
    h.pods(gang("b", cpu="1"))
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    assert len(h.client.deletions) == 8
    # b waits for a's victims on its nodes as for its own: it binds only once they
    # are all gone, beside a.
    survivors = {p.key: p for p in pods if p.key not in h.client.deletions}
    assert len(survivors) == 8
    for pod in pods:
        if pod.key in h.client.deletions:
            h.handlers.on_pod_delete(pod)
    await h.advance(10)
    await h.settle()
    bound = dict(h.client.bindings)
    assert set(bound) == {f"default/{g}-{i}" for g in "ab" for i in range(4)}
    await h.close()
