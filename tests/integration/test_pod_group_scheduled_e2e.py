"""``PodGroupScheduled`` on a v1alpha2 PodGroup never turns from True back to False
(KEP-5832), end to end through the embedded API server serving the Kubernetes 1.36
versions (no v1beta1): once the gang was scheduled, a later member that cannot fit
gets its own ``PodScheduled=False`` and the group stays ``Scheduled``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec

from tests.integration.conftest import eventually
from tests.integration.test_gangs_e2e import gang_member, native

KIND = "podgroups.scheduling.k8s.io"


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    c = SimCluster(
        [NodeSpec(count=3, cpu="4", memory="16Gi", zones=("zone-a", "zone-b"))],
        bookmark_interval=0.5,
        workload_versions=("v1alpha1", "v1alpha2"),
    )
    await c.start()
    yield c
    await c.stop()


class ConditionHistory:
    """Every PodGroupScheduled status the store committed for one PodGroup."""

    def __init__(self, cluster: SimCluster, name: str) -> None:
        self.name = name
        self.statuses: list[tuple[str, str]] = []
        self.stop = cluster.store.listen(KIND, self._on)

    def _on(self, type_: str, obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] != self.name:
            return
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c["type"] == "PodGroupScheduled":
                entry = (c["status"], c.get("reason", ""))
                if not self.statuses or self.statuses[-1] != entry:
                    self.statuses.append(entry)


def pod_condition(cluster: SimCluster, name: str) -> dict[str, Any] | None:
    pod = cluster.store.get("pods", name, "default")
    for c in pod.get("status", {}).get("conditions", []):
        if c["type"] == "PodScheduled":
            return dict(c)
    return None


def group_events(cluster: SimCluster, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.store.list("events.events.k8s.io", namespace="default")
        if e["regarding"]["name"] == name
        and e["regarding"]["kind"] == "PodGroup"
        and e["reason"] == "FailedScheduling"
    ]


@pytest.mark.parametrize("late", ["replacement", "extra member"])
async def test_pod_group_scheduled_stays_true_when_a_later_member_cannot_fit(
    cluster: SimCluster, daemon: SchedulerDaemon, late: str
) -> None:
    history = ConditionHistory(cluster, "pg")
    kind, obj = native("pg", 2)
    cluster.store.create(kind, obj)
    for i in range(2):
        cluster.store.create("pods", gang_member("native", "pg", i, "1"))
    await eventually(
        lambda: history.statuses[-1:] == [("True", "Scheduled")],
        timeout=30,
        what=lambda: f"PodGroupScheduled True, saw {history.statuses}",
    )
    if late == "replacement":
        # A member is gone (say, evicted) and its controller creates a replacement
        # that fits on no node: one bound member, below minCount again.
        cluster.store.delete("pods", "pg-1", "default", grace_period_seconds=0)
    # 3 nodes of 4 cpu: 16 cpu fit nowhere.
    cluster.store.create("pods", gang_member("native", "pg", 2, "16"))
    await eventually(
        lambda: (pod_condition(cluster, "pg-2") or {}).get("status") == "False",
        timeout=30,
        what="PodScheduled=False on the member that cannot fit",
    )
    condition = pod_condition(cluster, "pg-2")
    assert condition is not None and "Insufficient cpu" in condition["message"]
    # The group's FailedScheduling event is written after the status patches.
    await eventually(lambda: bool(group_events(cluster, "pg")), timeout=30, what="group event")
    group = cluster.store.get(kind, "pg", "default")
    (scheduled,) = [c for c in group["status"]["conditions"] if c["type"] == "PodGroupScheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("True", "Scheduled")
    assert history.statuses == [("True", "Scheduled")]
    assert cluster.store.get("pods", "pg-0", "default")["spec"].get("nodeName")
