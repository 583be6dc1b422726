"""The one reader of a cluster (``troupe.whatif.read``), against the embedded API
server: every collection in pages, and the gang kinds at the versions the server
serves (API discovery), not at versions written into the reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec
from troupe.whatif.errors import WhatIfError
from troupe.whatif.read import ClusterAddress, read_cluster

from tests.integration.conftest import pod
from tests.integration.test_gangs_e2e import coscheduling, native, workload


def names(objs: list[dict[str, object]]) -> list[str]:
    return sorted(str(o["metadata"]["name"]) for o in objs)  # type: ignore[index]


async def test_every_collection_is_read_in_pages_of_the_size_asked(tmp_path: Path) -> None:
    async with SimCluster([NodeSpec(count=3, cpu="4", memory="8Gi")]) as cluster:
        for i in range(7):
            cluster.store.create("pods", pod(f"p-{i}"))
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        audit = cluster.server.start_audit()
        seen: list[tuple[str, int]] = []
        snapshot = await read_cluster(
            ClusterAddress(str(kubeconfig)),
            lambda resource, count: seen.append((resource, count)),
            page_size=2,
        )
    assert names(snapshot.objects("pods")) == [f"p-{i}" for i in range(7)]
    assert names(snapshot.objects("nodes")) == ["node-0", "node-1", "node-2"]
    # 7 pods in pages of 2: four requests, the last one without a continue token.
    assert [r.path for r in audit if r.path == "/api/v1/pods"] == ["/api/v1/pods"] * 4
    assert [r.path for r in audit if r.path == "/api/v1/nodes"] == ["/api/v1/nodes"] * 2
    # The progress hears of every page, and counts every object read so far.
    assert [resource for resource, _ in seen].count("pods") == 4
    assert seen[-1] == ("pods", sum(len(v) for v in snapshot.resources.values()))
    assert all(o["apiVersion"] == "v1" and o["kind"] == "Pod" for o in snapshot.objects("pods"))
    assert snapshot.taken_at and snapshot.server_version


@pytest.mark.parametrize(
    ("versions", "pod_groups_at"),
    [
        # Kubernetes 1.35/1.36: PodGroup only at v1alpha2.
        (("v1alpha1", "v1alpha2"), "scheduling.k8s.io/v1alpha2"),
        # Kubernetes 1.37: the newest troupe understands, v1beta1.
        (("v1alpha1", "v1alpha2", "v1beta1", "v1alpha3"), "scheduling.k8s.io/v1beta1"),
    ],
)
async def test_gang_objects_are_read_at_the_version_the_server_serves(
    tmp_path: Path, versions: tuple[str, ...], pod_groups_at: str
) -> None:
    async with SimCluster(workload_versions=versions) as cluster:
        for kind, obj in (coscheduling("cosched", 2), workload("wl", 2), native("pg", 2)):
            cluster.store.create(kind, obj)
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        snapshot = await read_cluster(ClusterAddress(str(kubeconfig)))
    (group,) = snapshot.objects("podgroups")
    assert (group["metadata"]["name"], group["apiVersion"]) == ("pg", pod_groups_at)
    assert snapshot.gang_versions["scheduling.k8s.io/v1alpha2"] == pod_groups_at
    # The 1.35 Workload (v1alpha1) is read beside the PodGroup's template Workloads.
    assert "wl" in names(snapshot.objects("workloads"))
    assert names(snapshot.objects("coschedulingpodgroups")) == ["cosched"]


async def test_a_cluster_that_cannot_be_reached_is_one_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    with pytest.raises(WhatIfError, match="no-such-kubeconfig"):
        await read_cluster(ClusterAddress(str(missing)))
