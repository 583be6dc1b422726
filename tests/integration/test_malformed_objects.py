"""An object troupe cannot read (a custom resource stored without schema checks,
with a field of the wrong type) is left out and logged; every other object of its
kind keeps being watched and scheduled."""

from __future__ import annotations

from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod
from tests.integration.test_gangs_e2e import coscheduling, gang_member


async def test_a_pod_group_that_does_not_parse_blocks_no_other_gang_or_pod(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    bindings = Bindings(cluster)
    kind, broken = coscheduling("broken", 2)
    broken["spec"]["minMember"] = "two"  # not an integer: troupe's model rejects it
    cluster.store.create(kind, broken)
    for i in range(2):
        cluster.store.create("pods", gang_member("coscheduling", "broken", i, "500m"))
    kind, ok = coscheduling("ok", 2)
    cluster.store.create(kind, ok)
    for i in range(2):
        cluster.store.create("pods", gang_member("coscheduling", "ok", i, "500m"))
    cluster.store.create("pods", pod("solo"))
    expected = {"default/ok-0", "default/ok-1", "default/solo"}
    await eventually(
        lambda: expected <= set(bindings.node),
        timeout=30,
        what=lambda: f"the valid gang and the plain pod bound, got {sorted(bindings.node)}",
    )
    # A later valid group still arrives through the same watch.
    kind, late = coscheduling("late", 1)
    cluster.store.create(kind, late)
    cluster.store.create("pods", gang_member("coscheduling", "late", 0, "500m"))
    await eventually(
        lambda: "default/late-0" in bindings.node, timeout=30, what="the later gang bound"
    )
    assert not {"default/broken-0", "default/broken-1"} & set(bindings.node)


async def test_pods_whose_requests_are_unparsable_or_negative_are_never_bound(
    cluster: SimCluster, daemon: SchedulerDaemon
) -> None:
    # The embedded server stores what a real one would refuse; troupe must not take
    # a negative request as room given back, nor stop at an unparsable one.
    bindings = Bindings(cluster)
    for name, cpu in (("lots", "lots"), ("negative", "-2"), ("suffix", "1x")):
        cluster.store.create("pods", pod(name, cpu=cpu))
    less_than_nothing = pod("negative-memory")
    less_than_nothing["spec"]["containers"][0]["resources"]["requests"]["memory"] = "-1Gi"
    cluster.store.create("pods", less_than_nothing)
    cluster.store.create("pods", pod("solo"))
    await eventually(lambda: "default/solo" in bindings.node, timeout=30, what="the valid pod")
    cluster.store.create("pods", pod("late"))
    await eventually(lambda: "default/late" in bindings.node, timeout=30, what="a later pod")
    refused = {"default/lots", "default/negative", "default/negative-memory", "default/suffix"}
    assert not refused & set(bindings.node)
