"""Gang preemption (KEP-5710) end to end: the embedded API server, its kubelets, and a
troupe daemon talking to it over HTTP. A full cluster of low-priority pods; a
high-priority scheduler-plugins PodGroup arrives and makes room for the whole gang."""

from __future__ import annotations

from troupe.api.gangs import POD_GROUP_LABEL
from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod
from tests.integration.test_gangs_e2e import coscheduling
from tests.integration.test_preemption import (
    Deletions,
    condition,
    events,
    fill,
    metric,
    priority_classes,
)


async def test_a_high_priority_pod_group_preempts_low_priority_pods_and_binds_whole(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    priority_classes(cluster)
    await fill(cluster)
    gone = Deletions(cluster)
    bindings = Bindings(cluster)
    kind, obj = coscheduling("train", 3)
    cluster.store.create(kind, obj)
    members = [f"train-{i}" for i in range(3)]
    for name in members:
        labels = {"metadata": {"labels": {POD_GROUP_LABEL: "train"}}}
        cluster.store.create("pods", pod(name, cpu="2", priorityClassName="high", **labels))

    def bound() -> bool:
        return all(f"default/{m}" in bindings.node for m in members)

    await eventually(bound, 20, what="the gang to be bound")
    # 3 members of 2 cpu on 4-cpu nodes full of 1-cpu pods: exactly 6 pods go, each
    # from a node a member was nominated to and then bound on.
    assert len(gone.pods) == 6
    nodes = {bindings.node[f"default/{m}"] for m in members}
    assert {gone.nominated[m] for m in members} == nodes
    for victim in gone.pods.values():
        assert victim["spec"]["nodeName"] in nodes
        target = condition(victim, "DisruptionTarget")
        assert target is not None
        assert (target["status"], target["reason"]) == ("True", "PreemptionByScheduler")
    assert not bindings.twice()
    await eventually(lambda: len(events(cluster, "Preempted")) == 6, what="Preempted events")
    assert {e["note"].rsplit(" on node ", 1)[0] for e in events(cluster, "Preempted")} == {
        "Preempted by pod group default/train"
    }
    sample = daemon.metrics_registry.get_sample_value
    assert sample("scheduler_podgroup_preemption_attempts_total", {"result": "preempted"}) == 1
    assert metric(daemon, "scheduler_podgroup_preemption_victims_count") == 1
    assert metric(daemon, "scheduler_podgroup_preemption_victims_sum") == 6
    waiting = {
        "result": "waiting_on_preemption",
        "profile": "troupe-scheduler",
        "type": "podgroup",
    }
    assert (sample("scheduler_podgroup_schedule_attempts_total", waiting) or 0) >= 1
    # Pod-by-pod preemption did not run for the gang's members.
    assert metric(daemon, "scheduler_preemption_victims_count") == 0
