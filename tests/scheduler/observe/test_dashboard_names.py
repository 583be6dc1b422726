"""Every series the Grafana dashboard and the alert rules query is one troupe
exports: checked against a real scrape after a run on the embedded cluster."""

from __future__ import annotations

from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod
from tests.manifests.metric_names import (
    HISTOGRAM_FAMILIES,
    LEADER_ELECTION_ONLY,
    queryable_names,
)
from tests.scheduler.observe.test_scrape_e2e import scrape, served

__all__ = ["served"]


async def test_the_dashboard_and_alerts_query_only_what_a_real_run_exports(
    cluster: SimCluster, daemon: SchedulerDaemon, served: str
) -> None:
    bindings = Bindings(cluster)
    for i in range(3):
        cluster.store.create("pods", pod(f"p{i}", cpu="1"))
    cluster.store.create("pods", pod("stuck", cpu="64"))
    # A gang, so the pod-group series exist too.
    cluster.store.create(
        "podgroups.scheduling.x-k8s.io",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "default"},
            "spec": {"minMember": 2},
        },
    )
    for i in range(2):
        cluster.store.create(
            "pods",
            pod(f"g-{i}", cpu="100m", metadata={"labels": {"scheduling.x-k8s.io/pod-group": "g"}}),
        )
    await eventually(lambda: len(bindings.node) == 5, timeout=20, what="bindings")
    scraped = {name for name, _ in (await scrape(served))}
    missing = set()
    for name in queryable_names():
        if name in HISTOGRAM_FAMILIES:  # a family name; its series are checked
            continue
        if name in LEADER_ELECTION_ONLY:  # this daemon runs without an elector
            continue
        if name not in scraped:
            missing.add(name)
    assert missing == set()
