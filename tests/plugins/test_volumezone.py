"""VolumeZone (troupe/plugins/volumezone/zones.py): bound PVs' zone and region labels
against the nodes', both label generations, multi-zone values, unlabelled nodes,
unbound WaitForFirstConsumer claims, and PreFilter's rejections (upstream
volume_zone_test.go's families, our own cases); the columnar mask agrees with the
per-node check."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.objects import Pod
from troupe.api.status import Code
from troupe.api.volumes import StorageObject, StorageObjects
from troupe.plugins.volumezone.zones import (
    BETA_REGION,
    BETA_ZONE,
    REGION,
    ZONE,
    PVTopology,
    node_fits,
    pre_filter,
    zone_mask,
)

from tests.plugins.builders import make_node, make_pod, table_of
from tests.plugins.storage_builders import make_class, make_pv, make_pvc, with_claims


def zonal_pod(*claims: str) -> Pod:
    return with_claims(make_pod().name("p"), *claims).obj()


def objects(pv_labels: dict[str, str]) -> list[StorageObject]:
    pv = make_pv("pv-1")
    for key, value in pv_labels.items():
        pv.label(key, value)
    return [make_pvc("data").bound_to("pv-1").obj(), pv.obj()]


FILTER_CASES = [
    pytest.param({ZONE: "a"}, {ZONE: "a"}, True, id="the PV's zone is the node's"),
    pytest.param({ZONE: "a"}, {ZONE: "b"}, False, id="a PV in another zone"),
    pytest.param({ZONE: "a__b"}, {ZONE: "b"}, True, id="a multi-zone PV admits each of its zones"),
    pytest.param({ZONE: "a__b"}, {ZONE: "c"}, False, id="but no other zone"),
    pytest.param({ZONE: " a __ b"}, {ZONE: "b"}, True, id="multi-zone values are trimmed"),
    pytest.param({ZONE: "a__"}, {ZONE: "c"}, True, id="a malformed multi-zone label is ignored"),
    pytest.param({BETA_ZONE: "a"}, {ZONE: "a"}, True, id="a beta PV label matches a GA node label"),
    pytest.param({BETA_ZONE: "a"}, {ZONE: "b"}, False, id="... and must still agree"),
    pytest.param({BETA_ZONE: "a"}, {BETA_ZONE: "a"}, True, id="beta labels on both"),
    pytest.param({ZONE: "a"}, {BETA_ZONE: "a"}, False, id="a GA PV label is not read as beta"),
    pytest.param({ZONE: "a"}, {}, True, id="a node without zone labels fits anything"),
    pytest.param({ZONE: "a"}, {"other": "x"}, True, id="unrelated node labels do not count"),
    pytest.param({ZONE: "a"}, {REGION: "r1"}, False, id="a zoned node must carry the PV's key"),
    pytest.param(
        {ZONE: "a", REGION: "r1"}, {ZONE: "a", REGION: "r1"}, True, id="zone and region both agree"
    ),
    pytest.param(
        {ZONE: "a", REGION: "r1"}, {ZONE: "a", REGION: "r2"}, False, id="a region disagrees"
    ),
    pytest.param(
        {BETA_REGION: "r1"}, {REGION: "r1", ZONE: "x"}, True, id="a beta region matches a GA region"
    ),
]


@pytest.mark.parametrize(("pv_labels", "node_labels", "fits"), FILTER_CASES)
def test_bound_pv_zones_against_the_node(
    pv_labels: dict[str, str], node_labels: dict[str, str], fits: bool
) -> None:
    store = StorageObjects.of(*objects(pv_labels))
    decision = pre_filter(zonal_pod("data"), store, store, store)
    if decision.status.code is Code.SKIP:
        # Nothing zonal (here: a malformed label) admits every node.
        assert fits
        return
    the_node = make_node().name("n").labels(node_labels).obj()
    assert node_fits(decision.topologies, the_node.metadata.labels) is fits
    table = table_of([the_node])
    assert bool(zone_mask(table, decision.topologies)[table.slot("n")]) is fits  # type: ignore[index]


PREFILTER_CASES = [
    pytest.param([], zonal_pod(), Code.SKIP, "", id="a pod without claims is skipped"),
    pytest.param(
        [make_pvc("data").bound_to("pv-1").obj(), make_pv("pv-1").obj()],
        zonal_pod("data"),
        Code.SKIP,
        "",
        id="a PV without zone labels is skipped",
    ),
    pytest.param(
        [make_class("wffc").wait_for_first_consumer().obj(), make_pvc("data").cls("wffc").obj()],
        zonal_pod("data"),
        Code.SKIP,
        "",
        id="an unbound WaitForFirstConsumer claim is left to VolumeBinding",
    ),
    pytest.param(
        [make_class("now").obj(), make_pvc("data").cls("now").obj()],
        zonal_pod("data"),
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "PersistentVolume had no name",
        id="an unbound Immediate claim",
    ),
    pytest.param(
        [make_pvc("data").cls(None).obj()],
        zonal_pod("data"),
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "PersistentVolumeClaim had no pv name and storageClass name",
        id="an unbound claim without a class",
    ),
    pytest.param(
        [make_pvc("data").cls("gone").obj()],
        zonal_pod("data"),
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        'storageclass.storage.k8s.io "gone" not found',
        id="an unbound claim of a missing class",
    ),
    pytest.param(
        [make_class("odd").no_binding_mode().obj(), make_pvc("data").cls("odd").obj()],
        zonal_pod("data"),
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        'VolumeBindingMode not set for StorageClass "odd"',
        id="a class without binding mode",
    ),
    pytest.param(
        [],
        zonal_pod("data"),
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        'persistentvolumeclaim "data" not found',
        id="a missing claim",
    ),
    pytest.param(
        [make_pvc("data").bound_to("pv-gone").obj()],
        zonal_pod("data"),
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        'persistentvolume "pv-gone" not found',
        id="a claim bound to a missing PV",
    ),
    pytest.param(
        [],
        zonal_pod(""),
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "PersistentVolumeClaim had no name",
        id="a volume naming no claim",
    ),
    pytest.param(
        [],
        with_claims(make_pod().name("p"), ephemeral=("scratch",)).obj(),
        Code.SKIP,
        "",
        id="generic ephemeral volumes are not read",
    ),
]


@pytest.mark.parametrize(("stored", "the_pod", "code", "message"), PREFILTER_CASES)
def test_prefilter(stored: list[StorageObject], the_pod: Pod, code: Code, message: str) -> None:
    store = StorageObjects.of(*stored)
    decision = pre_filter(the_pod, store, store, store)
    assert decision.status.code is code
    assert decision.status.message == message


def test_pre_bound_claims_are_read_by_volume_name_alone() -> None:
    """VolumeZone reads ``volumeName`` (VolumeBinding also wants bind-completed)."""
    store = StorageObjects.of(
        make_pvc("data").pre_bound_to("pv-1").obj(), make_pv("pv-1").label(ZONE, "a").obj()
    )
    decision = pre_filter(zonal_pod("data"), store, store, store)
    assert decision.topologies == (PVTopology("pv-1", ZONE, frozenset({"a"})),)


values = st.sampled_from(("a", "b", "c", None))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.fixed_dictionaries({ZONE: values, BETA_ZONE: values, REGION: values}), max_size=6),
    st.lists(
        st.tuples(st.sampled_from((ZONE, BETA_ZONE, REGION, BETA_REGION)), st.sets(values)),
        max_size=3,
    ),
)
def test_the_zone_mask_agrees_with_the_per_node_check(
    node_labels: list[dict[str, str | None]], pv_labels: list[tuple[str, set[str | None]]]
) -> None:
    nodes = [
        make_node().name(f"n{i}").labels({k: v for k, v in labels.items() if v}).obj()
        for i, labels in enumerate(node_labels)
    ]
    table = table_of(nodes, capacity=8)
    topologies = [
        PVTopology("pv", key, frozenset(v for v in zones if v)) for key, zones in pv_labels
    ]
    mask = zone_mask(table, topologies)
    for each in nodes:
        slot = table.slot(each.metadata.name)
        assert slot is not None
        assert bool(mask[slot]) == node_fits(topologies, each.metadata.labels)
    assert not mask[~table.present].any()
