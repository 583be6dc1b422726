"""DefaultPreemption through the scheduling cycle of an in-process scheduler: what is
nominated, evicted, reported and counted, and how nominations hold room."""

from __future__ import annotations

from troupe.api.gangs import POD_GROUP_LABEL, GangApi
from troupe.api.objects import Pod, PodCondition
from troupe.scheduler.cycle.evictions import disruption_condition
from troupe.scheduler.observe.metrics import SchedulerMetrics

from tests.plugins.preemption_helpers import SCHEDULER, harness, node, pending, running
from tests.scheduler.gang_helpers import coscheduling_group
from tests.scheduler.harness import Harness

LOW = [running(f"low-{i}", "n1", priority=i) for i in range(4)]


def message(h: Harness, key: str) -> str:
    return h.client.conditions[key].message


def deleted(h: Harness, names: list[str]) -> None:
    """The victims' deletions reach the informers."""
    for name in names:
        pod = next(p for p in LOW if p.metadata.name == name)
        h.handlers.on_pod_delete(pod)


async def test_a_high_priority_pod_in_a_full_cluster_preempts_and_then_binds_there() -> None:
    h = harness(["n1"]).pods(LOW)
    h.pods([pending("p", cpu="2").obj()])
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    # The two least important pods go; the preemptor is nominated to their node.
    assert sorted(h.client.deletions) == ["default/low-0", "default/low-1"]
    assert h.client.conditions["default/low-0"] == disruption_condition(SCHEDULER)
    assert h.client.nominations["default/p"] == "n1"
    assert message(h, "default/p") == "0/1 nodes are available: 1 Insufficient cpu."
    preempted = h.client.events_for("default/low-1", "Preempted")
    assert [(e.type, e.action, e.note) for e in preempted] == [
        ("Normal", "Preempting", "Preempted by pod uid-p on node n1")
    ]
    deleted(h, ["low-0", "low-1"])
    await h.advance(10)
    await h.settle()
    assert h.client.node_of("default/p") == "n1"
    await h.close()


async def test_room_nominated_to_a_preemptor_is_not_taken_by_a_lesser_pod() -> None:
    h = harness(["n1"]).pods(LOW)
    h.pods([pending("p", cpu="2").obj()])
    await h.settle()
    deleted(h, ["low-0", "low-1"])
    # The preemptor backs off; a pod of the victims' priority comes first.
    assert h.scheduler.queue.where("default/p") == "backoff"
    h.pods([pending("lesser", cpu="2", priority=0).obj()])
    await h.settle()
    assert h.client.node_of("default/lesser") is None
    assert message(h, "default/lesser").startswith("0/1 nodes are available: 1 Insufficient cpu.")
    await h.advance(10)
    await h.settle()
    assert h.client.node_of("default/p") == "n1"
    assert h.client.node_of("default/lesser") is None
    await h.close()


async def test_a_pod_that_may_not_preempt_says_so_and_evicts_nothing() -> None:
    h = harness(["n1"]).pods(LOW)
    h.pods([pending("p").preemption_policy("Never").obj()])
    await h.settle()
    assert h.client.deletions == []
    assert message(h, "default/p") == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )
    await h.close()


async def test_a_pod_with_no_victims_anywhere_gets_the_preemption_fit_error() -> None:
    h = harness(["n1", "n2"]).pods(
        [running("peer-1", "n1", cpu="4", priority=100), running("peer-2", "n2", "4", 500)]
    )
    h.pods([pending("p").nominated("n1").obj()])
    await h.settle()
    assert h.client.deletions == []
    assert message(h, "default/p") == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    # The nomination that can no longer help is cleared.
    assert h.client.nominations["default/p"] == ""
    assert h.scheduler.queue.nominated_node("default/p") is None
    await h.close()


def terminating_victim(name: str) -> Pod:
    pod = running(name, "n1", priority=0)
    pod.metadata.deletion_timestamp = "2024-01-01T00:00:00Z"
    pod.status.conditions.append(
        PodCondition.model_validate(disruption_condition(SCHEDULER).model_dump())
    )
    return pod


async def test_a_pod_waits_while_a_victim_on_its_nominated_node_terminates() -> None:
    h = harness(["n1"]).pods([terminating_victim("going"), *LOW[1:]])
    h.pods([pending("p", cpu="2").nominated("n1").obj()])
    await h.settle()
    assert h.client.deletions == []
    assert message(h, "default/p").endswith(
        "preemption: not eligible due to a terminating pod on the nominated node."
    )
    await h.close()


def sample(metrics: SchedulerMetrics, name: str) -> float:
    value = metrics.registry.get_sample_value(name)
    return 0.0 if value is None else value


async def test_preemption_is_counted() -> None:
    metrics = SchedulerMetrics.for_process()
    h = Harness(metrics=metrics).nodes([node("n1").obj()]).pods(LOW)
    assert sample(metrics, "scheduler_preemption_attempts_total") == 0
    h.pods([pending("p", cpu="2").obj(), pending("never").preemption_policy("Never").obj()])
    await h.settle()
    # Both ran DefaultPreemption's PostFilter; one preempted two victims.
    assert sample(metrics, "scheduler_preemption_attempts_total") == 2
    assert sample(metrics, "scheduler_preemption_victims_count") == 1
    assert sample(metrics, "scheduler_preemption_victims_sum") == 2
    buckets = {
        le: metrics.registry.get_sample_value("scheduler_preemption_victims_bucket", {"le": le})
        for le in ("1.0", "2.0", "64.0", "+Inf")
    }
    assert buckets == {"1.0": 0, "2.0": 1, "64.0": 1, "+Inf": 1}
    await h.close()


async def test_a_gang_that_cannot_fit_evicts_nothing_for_any_of_its_members() -> None:
    h = harness(["n1"]).pods(LOW)
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("g", 2))
    members = [pending(f"g-{i}", cpu="3").label(POD_GROUP_LABEL, "g").obj() for i in range(2)]
    h.pods(members)
    await h.settle()
    # Each member alone could preempt three pods, but the gang as a whole never fits.
    assert h.client.deletions == []
    assert h.client.bindings == []
    await h.close()


async def test_a_nomination_ends_when_the_pod_is_bound_elsewhere() -> None:
    h = harness(["n1"]).pods(LOW)
    h.pods([pending("p", cpu="2").obj()])
    await h.settle()
    assert h.scheduler.queue.nominated_node("default/p") == "n1"
    bound = pending("p", cpu="2").node("n2").obj()
    h.handlers.on_pod_update(pending("p", cpu="2").nominated("n1").obj(), bound)
    assert h.scheduler.queue.nominated_node("default/p") is None
    await h.close()


async def test_a_lesser_nomination_on_the_preempted_node_is_cleared() -> None:
    h = harness(["n1"]).pods(LOW)
    h.pods([pending("mid", cpu="2", priority=50).obj()])
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    assert h.client.nominations["default/mid"] == "n1"
    h.pods([pending("top", cpu="4", priority=100).obj()])
    await h.settle()
    await h.scheduler.background.drain(timeout=1)
    assert h.client.nominations["default/top"] == "n1"
    assert h.client.nominations["default/mid"] == ""
    assert h.scheduler.queue.nominated_node("default/mid") is None
    await h.close()
