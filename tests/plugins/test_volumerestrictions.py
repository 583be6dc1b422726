"""VolumeRestrictions (troupe/plugins/volumerestrictions): in-tree disk conflicts and
ReadWriteOncePod claims, with AddPod/RemovePod (upstream
volume_restrictions_test.go's families, our own cases); the disk index agrees with
the per-node check."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.objects import Pod, Volume
from troupe.api.status import Code
from troupe.api.volumes import StorageObjects
from troupe.plugins.volumerestrictions.disks import (
    ERR_DISK_CONFLICT,
    DiskIndex,
    conflicts_on_node,
)
from troupe.plugins.volumerestrictions.rwop import ERR_RWOP_CONFLICT, filter_node, pre_filter

from tests.plugins.builders import make_node, make_pod, table_of
from tests.plugins.storage_builders import (
    ebs_disk,
    gce_disk,
    iscsi_disk,
    make_pvc,
    rbd_disk,
    with_claims,
)


def pod_with(name: str, *volumes: Volume) -> Pod:
    builder = make_pod().name(name)
    for volume in volumes:
        builder.volume(volume)
    return builder.obj()


DISK_CASES = [
    pytest.param(gce_disk("d", "pd-1"), gce_disk("d", "pd-1"), True, id="the same GCE PD twice"),
    pytest.param(
        gce_disk("d", "pd-1", read_only=True), gce_disk("d", "pd-1", read_only=True), False,
        id="a GCE PD read-only by both",
    ),
    pytest.param(
        gce_disk("d", "pd-1", read_only=True), gce_disk("d", "pd-1"), True,
        id="a GCE PD read-only next to read-write",
    ),
    pytest.param(gce_disk("d", "pd-1"), gce_disk("d", "pd-2"), False, id="two GCE PDs"),
    pytest.param(ebs_disk("d", "vol-1"), ebs_disk("d", "vol-1"), True, id="the same EBS volume"),
    pytest.param(
        ebs_disk("d", "vol-1", read_only=True), ebs_disk("d", "vol-1", read_only=True), True,
        id="the same EBS volume even read-only",
    ),
    pytest.param(ebs_disk("d", "vol-1"), ebs_disk("d", "vol-2"), False, id="two EBS volumes"),
    pytest.param(iscsi_disk("d", "iqn-1"), iscsi_disk("d", "iqn-1"), True, id="the same IQN"),
    pytest.param(
        iscsi_disk("d", "iqn-1", read_only=True), iscsi_disk("d", "iqn-1", read_only=True), False,
        id="an IQN read-only by both",
    ),
    pytest.param(
        rbd_disk("d", ["m1", "m2"], "img"), rbd_disk("d", ["m2", "m3"], "img"), True,
        id="an RBD image reached through a shared monitor",
    ),
    pytest.param(
        rbd_disk("d", ["m1"], "img"), rbd_disk("d", ["m2"], "img"), False,
        id="RBD images without a shared monitor",
    ),
    pytest.param(
        rbd_disk("d", ["m1"], "img", pool="a"), rbd_disk("d", ["m1"], "img", pool="b"), False,
        id="RBD images in two pools",
    ),
    pytest.param(
        rbd_disk("d", ["m1"], "img", read_only=True), rbd_disk("d", ["m1"], "img", read_only=True),
        False, id="an RBD image read-only by both",
    ),
    pytest.param(gce_disk("d", "x"), ebs_disk("d", "x"), False, id="disks of different kinds"),
]  # fmt: skip


@pytest.mark.parametrize(("new", "existing", "conflict"), DISK_CASES)
def test_disk_conflicts(new: Volume, existing: Volume, conflict: bool) -> None:
    incoming = pod_with("new", new)
    running = pod_with("old", existing)
    assert conflicts_on_node(incoming, [running]) is conflict
    table = table_of([make_node().name("n").obj()], pods_on={"n": [running]})
    index = DiskIndex.of_table(table)
    assert bool(index.conflict_mask(incoming, table.capacity)[table.slot("n")]) is conflict  # type: ignore[index]
    expected = (ERR_DISK_CONFLICT,) if conflict else ()
    state = pre_filter(incoming, StorageObjects.of(), _NoUsers()).state
    assert state is not None
    assert filter_node(state, conflict).reasons == expected


class _NoUsers:
    def claim_in_use(self, namespace: str, name: str) -> bool:
        return False


class _Users:
    def __init__(self, *claims: str) -> None:
        self.claims = set(claims)

    def claim_in_use(self, namespace: str, name: str) -> bool:
        return f"{namespace}/{name}" in self.claims


RWOP = make_pvc("single").modes("ReadWriteOncePod").obj()
RWO = make_pvc("shared").modes("ReadWriteOnce").obj()


def test_a_pod_without_disks_or_used_rwop_claims_is_skipped() -> None:
    store = StorageObjects.of(RWOP, RWO)
    assert pre_filter(make_pod().obj(), store, _NoUsers()).status.code is Code.SKIP
    alone = with_claims(make_pod().name("p"), "single", "shared").obj()
    assert pre_filter(alone, store, _NoUsers()).status.code is Code.SKIP


def test_a_rwop_claim_in_use_makes_every_node_unschedulable() -> None:
    store = StorageObjects.of(RWOP)
    decision = pre_filter(
        with_claims(make_pod().name("p"), "single").obj(), store, _Users("default/single")
    )
    assert decision.state is not None and decision.state.conflicts == 1
    verdict = filter_node(decision.state, disk_conflict=False)
    assert verdict.code is Code.UNSCHEDULABLE  # preemption can free the claim
    assert verdict.reasons == (ERR_RWOP_CONFLICT,)


def test_a_rwo_claim_in_use_is_not_restricted() -> None:
    store = StorageObjects.of(RWO)
    decision = pre_filter(
        with_claims(make_pod().name("p"), "shared").obj(), store, _Users("default/shared")
    )
    assert decision.status.code is Code.SKIP


def test_a_claim_in_use_in_another_namespace_is_another_claim() -> None:
    store = StorageObjects.of(RWOP)
    decision = pre_filter(
        with_claims(make_pod().name("p"), "single").obj(), store, _Users("x/single")
    )
    assert decision.status.code is Code.SKIP


def test_a_missing_claim_is_unresolvable() -> None:
    decision = pre_filter(
        with_claims(make_pod().name("p"), "gone").obj(), StorageObjects.of(), _NoUsers()
    )
    assert decision.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert decision.status.reasons == ('persistentvolumeclaim "gone" not found',)


def test_removing_the_pod_that_holds_the_claim_frees_it() -> None:
    """RemovePod (a preemption victim) and AddPod (a nominated pod) move the count."""
    store = StorageObjects.of(RWOP)
    holder = with_claims(make_pod().name("holder"), "single").obj()
    decision = pre_filter(
        with_claims(make_pod().name("p"), "single").obj(), store, _Users("default/single")
    )
    assert decision.state is not None
    freed = decision.state.without_pod(holder)
    assert freed.conflicts == 0 and filter_node(freed, False).is_success
    assert freed.with_pod(holder).verdict().reasons == (ERR_RWOP_CONFLICT,)
    unrelated = with_claims(make_pod().name("other"), "shared").obj()
    assert decision.state.without_pod(unrelated) == decision.state


def test_a_disk_conflict_is_reported_before_the_rwop_conflict() -> None:
    store = StorageObjects.of(RWOP)
    the_pod = with_claims(make_pod().name("p"), "single").volume(gce_disk("d", "pd")).obj()
    decision = pre_filter(the_pod, store, _Users("default/single"))
    assert decision.state is not None
    assert filter_node(decision.state, disk_conflict=True).reasons == (ERR_DISK_CONFLICT,)


# --- the index against the per-node check --------------------------------------------------

disks = st.one_of(
    st.builds(gce_disk, st.just("d"), st.sampled_from(("pd-1", "pd-2")), st.booleans()),
    st.builds(ebs_disk, st.just("d"), st.sampled_from(("vol-1", "vol-2")), st.booleans()),
    st.builds(iscsi_disk, st.just("d"), st.sampled_from(("iqn-1", "iqn-2")), st.booleans()),
    st.builds(
        rbd_disk,
        st.just("d"),
        st.lists(st.sampled_from(("m1", "m2", "m3")), max_size=2),
        st.sampled_from(("img-1", "img-2")),
        st.sampled_from(("rbd", "other")),
        st.booleans(),
    ),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.lists(disks, max_size=2), max_size=3), min_size=1, max_size=4),
    st.lists(disks, max_size=3),
    st.data(),
)
def test_the_disk_index_agrees_with_the_per_node_check(
    nodes_pods: list[list[list[Volume]]], new_disks: list[Volume], data: st.DataObject
) -> None:
    nodes = [make_node().name(f"n{i}").obj() for i in range(len(nodes_pods))]
    pods_on = {
        f"n{i}": [pod_with(f"p{i}-{j}", *vols) for j, vols in enumerate(pods)]
        for i, pods in enumerate(nodes_pods)
    }
    table = table_of(nodes, pods_on=pods_on, capacity=8)
    index = DiskIndex.of_table(table)
    # Remove one pod again, as its deletion would.
    victims = [(n, p) for n, pods in pods_on.items() for p in pods]
    if victims and data.draw(st.booleans()):
        node_name, victim = data.draw(st.sampled_from(victims))
        index.remove_pod(table.slot(node_name), victim)  # type: ignore[arg-type]
        pods_on[node_name] = [p for p in pods_on[node_name] if p is not victim]
    incoming = pod_with("new", *new_disks)
    mask = index.conflict_mask(incoming, table.capacity)
    for name, pods in pods_on.items():
        assert bool(mask[table.slot(name)]) == conflicts_on_node(incoming, pods), name  # type: ignore[index]
