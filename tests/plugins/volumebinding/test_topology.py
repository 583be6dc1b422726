"""The nodes bound local PVs pin a pod to (troupe/plugins/volumebinding/topology.py,
upstream GetEligibleNodes): when the bound claims can narrow the nodes, and when not."""

from __future__ import annotations

import pytest
from troupe.api.objects import Node
from troupe.api.volumes import StorageObject
from troupe.plugins.volumebinding.topology import (
    VolumeFits,
    eligible_node_names,
    local_volume_hostnames,
)

from tests.plugins.builders import make_node, table_of
from tests.plugins.storage_builders import make_pv, make_pvc
from tests.plugins.volumebinding.helpers import listers_of

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(name: str, hostname: str | None = None) -> Node:
    return make_node().name(name).label(HOST, hostname or name).label(ZONE, "a").obj()


NODES = [node("n1"), node("n2"), node("n3")]


def bound(claim: str, pv: str) -> StorageObject:
    return make_pvc(claim).cls("local").bound_to(pv).obj()


CASES = [
    pytest.param([], None, id="no bound claim does not narrow"),
    pytest.param(
        [bound("a", "pv-a"), make_pv("pv-a").obj()],
        None,
        id="a PV without affinity does not narrow",
    ),
    pytest.param(
        [bound("a", "pv-a"), make_pv("pv-a").on_host("n1").obj()],
        {"n1"},
        id="a local PV pins the pod to its node",
    ),
    pytest.param(
        [bound("a", "pv-a"), make_pv("pv-a").on_host("n1", "n3").obj()],
        {"n1", "n3"},
        id="a PV naming two hosts allows both",
    ),
    pytest.param(
        [bound("a", "pv-a"), make_pv("pv-a").on_host("n1").obj(),
         bound("b", "pv-b"), make_pv("pv-b").on_host("n2").obj()],
        set(),
        id="local PVs on two nodes leave no node",
    ),
    pytest.param(
        [bound("a", "pv-a"), make_pv("pv-a").on_host("n1", "n2").obj(),
         bound("b", "pv-b"), make_pv("pv-b").affinity([(ZONE, "In", ["a"])]).obj()],
        {"n1", "n2"},
        id="a zonal PV next to a local one does not widen or narrow",
    ),
    pytest.param(
        [bound("a", "pv-a"),
         make_pv("pv-a").affinity([(HOST, "In", ["n1", "n2"]), (HOST, "In", ["n2", "n3"])]).obj()],
        {"n2"},
        id="hostname requirements of one term intersect",
    ),
    pytest.param(
        [bound("a", "pv-a"),
         make_pv("pv-a").affinity([(HOST, "In", ["n1"])], [(HOST, "In", ["n3"])]).obj()],
        {"n1", "n3"},
        id="the hosts of several terms unite",
    ),
    pytest.param(
        [bound("a", "pv-a"),
         make_pv("pv-a").affinity([(HOST, "In", ["n1"])], [(ZONE, "In", ["a"])]).obj()],
        None,
        id="a term without hostnames admits other nodes: no narrowing",
    ),
    pytest.param(
        [bound("a", "pv-a"), make_pv("pv-a").on_host("n1").obj(), bound("b", "pv-gone")],
        None,
        id="a missing PV does not narrow (Filter reports it)",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("objects", "expected"), CASES)
def test_eligible_nodes(objects: list[StorageObject], expected: set[str] | None) -> None:
    _, caches = listers_of(*objects)
    claims = [obj for obj in objects if getattr(obj, "kind", "") == "PersistentVolumeClaim"]
    names = eligible_node_names(claims, caches, table_of(NODES))  # type: ignore[arg-type]
    assert names == (None if expected is None else frozenset(expected))


def test_hostnames_resolve_to_node_names() -> None:
    """Upstream compared hostname label values with node names (kubernetes#125336)."""
    nodes = [node("ip-10-0-0-1.ec2.internal", "ip-10-0-0-1"), node("other", "ip-10-0-0-2")]
    listers, caches = listers_of(bound("a", "pv-a"), make_pv("pv-a").on_host("ip-10-0-0-1").obj())
    claim = listers.claims.get_claim("default", "a")
    assert claim is not None
    assert eligible_node_names([claim], caches, table_of(nodes)) == {"ip-10-0-0-1.ec2.internal"}


def test_local_volume_hostnames_only_for_host_pinned_volumes() -> None:
    assert local_volume_hostnames(make_pv("v").on_host("n1").obj()) == {"n1"}
    assert local_volume_hostnames(make_pv("v").obj()) is None
    assert local_volume_hostnames(make_pv("v").affinity().obj()) is None
    assert local_volume_hostnames(make_pv("v").affinity([(HOST, "NotIn", ["n1"])]).obj()) is None


def test_a_local_fit_is_the_named_nodes_its_affinity_admits() -> None:
    pinned = make_pv("v").affinity([(HOST, "In", ["n1", "n2"]), (ZONE, "In", ["b"])]).obj()
    nodes = [node("n1"), make_node().name("n2").label(HOST, "n2").label(ZONE, "b").obj()]
    table = table_of(nodes)
    fit = VolumeFits().fit(table, pinned)
    assert fit.dense is None
    assert fit.slots == {table.slot("n2")}


def test_fits_are_kept_until_the_nodes_change() -> None:
    table = table_of(NODES)
    fits = VolumeFits()
    pv = make_pv("v").affinity([(ZONE, "In", ["a"])]).obj()
    first = fits.fit(table, pv)
    assert fits.fit(table, pv.model_copy()) is first  # an assumed copy shares the affinity
    table.update_node(make_node().name("n1").label(HOST, "n1").label(ZONE, "b").obj())
    again = fits.fit(table, pv)
    assert again is not first
    assert not again.admits(table.slot("n1"))  # type: ignore[arg-type]
