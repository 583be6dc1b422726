"""NodeVolumeLimits (troupe/plugins/nodevolumelimits): unique CSI volumes per driver on a
node, pods' and VolumeAttachments', against the CSINode's allocatable count (upstream
csi_test.go's families, our own cases); the per-node-array table agrees with the
per-node reference."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.objects import Node, Pod
from troupe.api.storage import CSINode, VolumeAttachment
from troupe.api.volumes import StorageObject, StorageObjects, VolumeError
from troupe.plugins.nodevolumelimits.counts import AttachTable
from troupe.plugins.nodevolumelimits.limits import (
    ClaimNotFound,
    VolumeKeys,
    VolumeResolver,
    attach_limit_key,
    exceeds,
    needs_check,
    node_exceeds,
    node_limits,
)

from tests.plugins.builders import make_node, make_pod
from tests.plugins.storage_builders import (
    attachment,
    csi_node,
    ebs_disk,
    make_class,
    make_pv,
    make_pvc,
    with_claims,
)

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"


def claim_on(name: str, driver: str, handle: str) -> list[StorageObject]:
    """A claim bound to a CSI PV of ``driver`` with ``handle``."""
    pv = f"pv-{name}"
    return [make_pvc(name).bound_to(pv).obj(), make_pv(pv).csi(driver, handle).obj()]


def pod_with(name: str, *claims: str, ephemeral: tuple[str, ...] = ()) -> Pod:
    return with_claims(make_pod().name(name).uid(f"uid-{name}"), *claims, ephemeral=ephemeral).obj()


NODE = make_node().name("n1").obj()


@dataclass
class Case:
    new: Pod
    existing: list[Pod]
    objects: list[StorageObject]
    csi: CSINode | None
    exceeds: bool
    attachments: list[VolumeAttachment] = field(default_factory=list)
    node: Node = field(default_factory=lambda: NODE)


CASES = [
    pytest.param(
        Case(pod_with("new", "c"), [pod_with("old", "a")],
             [*claim_on("a", EBS, "v1"), *claim_on("c", EBS, "v3")], csi_node("n1", **{EBS: 2}),
             False),
        id="a second volume under a limit of two fits",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [pod_with("old", "a", "b")],
             [*claim_on("a", EBS, "v1"), *claim_on("b", EBS, "v2"), *claim_on("c", EBS, "v3")],
             csi_node("n1", **{EBS: 2}), True),
        id="a third volume over a limit of two does not",
    ),
    pytest.param(
        Case(pod_with("new", "a"), [pod_with("old", "a", "b")],
             [*claim_on("a", EBS, "v1"), *claim_on("b", EBS, "v2")], csi_node("n1", **{EBS: 2}),
             False),
        id="a volume a pod on the node already uses does not count again",
    ),
    pytest.param(
        Case(pod_with("new", "c", "d"), [pod_with("old", "a")],
             [*claim_on("a", EBS, "v1"), *claim_on("c", EBS, "v3"),
              make_pvc("d").bound_to("pv-c").obj()],
             csi_node("n1", **{EBS: 2}), False),
        id="two claims of the pod on the same PV count once",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [pod_with("old", "a")],
             [*claim_on("a", EBS, "v1"), *claim_on("c", GCE, "g1")],
             csi_node("n1", **{EBS: 1, GCE: 1}), False),
        id="each driver has its own limit",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [pod_with("old", "a")],
             [*claim_on("a", EBS, "v1"), *claim_on("c", GCE, "g1")],
             csi_node("n1", **{EBS: 1}), False),
        id="a driver without a limit is unlimited",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [pod_with("old", "a")],
             [*claim_on("a", EBS, "v1"), *claim_on("c", EBS, "v3")], None, False),
        id="a node without CSINode has no limit",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [pod_with("old", "a")],
             [*claim_on("a", EBS, "v1"), *claim_on("c", EBS, "v3")], None, True,
             node=make_node().name("n1").resource(attach_limit_key(EBS), 1).obj()),
        id="a legacy attachable-volumes allocatable is a limit",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [pod_with("old", "a")],
             [*claim_on("a", EBS, "v1"), *claim_on("c", EBS, "v3")], csi_node("n1", **{EBS: 5}),
             False, node=make_node().name("n1").resource(attach_limit_key(EBS), 1).obj()),
        id="the CSINode's count overrides the allocatable",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [pod_with("old", "a")],
             [*claim_on("a", EBS, "v1"), make_class("gp3").provisioner(EBS).obj(),
              make_pvc("c").cls("gp3").obj()],
             csi_node("n1", **{EBS: 1}), True),
        id="an unbound claim counts under its class's provisioner",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [pod_with("old", "a")],
             [*claim_on("a", EBS, "v1"), make_pvc("c").cls(None).obj()],
             csi_node("n1", **{EBS: 1}), False),
        id="an unbound claim without a class is not counted",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [pod_with("old", "a")],
             [*claim_on("a", EBS, "v1"), make_class("gp3").provisioner(EBS).obj(),
              make_pvc("c").cls("gp3").bound_to("pv-gone").obj()],
             csi_node("n1", **{EBS: 1}), True),
        id="a claim bound to a missing PV counts under its class",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [pod_with("old", "a")],
             [*claim_on("a", EBS, "v1"), make_pvc("c").bound_to("pv-nfs").obj(),
              make_pv("pv-nfs").obj()],
             csi_node("n1", **{EBS: 1}), False),
        id="a PV that is not CSI is not counted",
    ),
    pytest.param(
        Case(pod_with("new", ephemeral=("scratch",)), [pod_with("old", "a")],
             [*claim_on("a", EBS, "v1"), make_class("gp3").provisioner(EBS).obj(),
              make_pvc("new-scratch").cls("gp3").owned_by("uid-new").obj()],
             csi_node("n1", **{EBS: 1}), True),
        id="a generic ephemeral volume counts",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [pod_with("old", "a"), pod_with("stale", "gone")],
             [*claim_on("a", EBS, "v1"), *claim_on("c", EBS, "v3")], csi_node("n1", **{EBS: 2}),
             False),
        id="a pod on the node whose claim is gone is not counted",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [],
             [*claim_on("a", EBS, "v1"), *claim_on("c", EBS, "v3")], csi_node("n1", **{EBS: 1}),
             True, attachments=[attachment("va-1", "n1", "pv-a", attacher=EBS)]),
        id="a volume still attached for a deleted pod takes a slot",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [pod_with("old", "a")],
             [*claim_on("a", EBS, "v1"), *claim_on("c", EBS, "v3")], csi_node("n1", **{EBS: 2}),
             False, attachments=[attachment("va-1", "n1", "pv-a", attacher=EBS)]),
        id="an attachment of a pod's volume is not counted twice",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [],
             [*claim_on("c", EBS, "v3"), make_pv("pv-nfs").obj()], csi_node("n1", **{EBS: 1}),
             False,
             attachments=[attachment("va-1", "n1", None, attacher=EBS),
                          attachment("va-2", "n1", "pv-unknown", attacher=EBS),
                          attachment("va-3", "n1", "pv-nfs", attacher=EBS),
                          attachment("va-4", "n2", "pv-c", attacher=EBS)]),
        id="attachments without a known CSI PV, or of other nodes, do not count",
    ),
    pytest.param(
        Case(pod_with("new", "c"), [], claim_on("c", EBS, "v3"), csi_node("n1", **{EBS: 1}),
             True, attachments=[attachment("va-1", "n1", "pv-c", attacher=EBS)]),
        id="as upstream, the pod's volume attached only through an attachment counts twice",
    ),
]  # fmt: skip


def resolver(store: StorageObjects) -> VolumeResolver:
    return VolumeResolver(store, store, store, unbound_prefix="rnd")


@pytest.mark.parametrize("case", CASES)
def test_csi_limits(case: Case) -> None:
    store = StorageObjects.of(*case.objects)
    names = resolver(store)
    new = names.pod_volumes(case.new, new_pod=True)
    verdict = node_exceeds(
        new,
        node=case.node,
        csi_node=case.csi,
        pods_on_node=case.existing,
        attachments=[a for a in case.attachments if a.spec.node_name == "n1"],
        resolver=names,
    )
    assert verdict is case.exceeds


def test_pods_without_claim_volumes_are_skipped() -> None:
    assert not needs_check(make_pod().obj())
    assert not needs_check(make_pod().volume(ebs_disk("e", "vol-1")).obj())
    assert needs_check(pod_with("p", "c"))


def test_the_new_pods_missing_claim_is_reported() -> None:
    with pytest.raises(ClaimNotFound) as raised:
        resolver(StorageObjects.of()).pod_volumes(pod_with("p", "gone"), new_pod=True)
    assert (
        str(raised.value) == 'looking up PVC default/gone: persistentvolumeclaim "gone" not found'
    )


def test_an_ephemeral_claim_of_another_pod_is_an_error() -> None:
    store = StorageObjects.of(make_pvc("p-scratch").owned_by("uid-other").obj())
    with pytest.raises(VolumeError, match="was not created for pod default/p"):
        resolver(store).pod_volumes(pod_with("p", ephemeral=("scratch",)), new_pod=True)


def test_unbound_claims_get_handles_no_real_volume_has() -> None:
    store = StorageObjects.of(
        make_class("gp3").provisioner(EBS).obj(), make_pvc("c").cls("gp3").obj()
    )
    assert resolver(store).pod_volumes(pod_with("p", "c"), new_pod=True) == {
        f"{EBS}/rnd-default/c": attach_limit_key(EBS)
    }


def test_long_driver_names_are_hashed_into_the_limit_key() -> None:
    short = attach_limit_key("ebs.csi.aws.com")
    assert short == "attachable-volumes-csi-ebs.csi.aws.com"
    driver = "a-very-long-csi-driver-name.storage.example.com"
    long = attach_limit_key(driver)
    digest = hashlib.sha1(driver.encode()).hexdigest()[:16]
    assert long == f"attachable-volumes-csi-a-very-long-csi-driver-{digest}"
    assert len(long) <= 63
    limits = node_limits(
        NODE, csi_node("n1", **{"a-very-long-csi-driver-name_storage_example_com": 4})
    )
    assert limits == {long: 4}


# --- the table against the reference ------------------------------------------------------------

DRIVERS = (EBS, GCE)
volume_names = st.sampled_from([f"{d}/h{i}" for d in DRIVERS for i in range(4)])


def keys_of(names: set[str]) -> VolumeKeys:
    return {name: attach_limit_key(name.split("/")[0]) for name in names}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sets(volume_names, max_size=3), max_size=3),  # pods' volumes
            st.sets(volume_names, max_size=3),  # attachments
            st.fixed_dictionaries({}, optional={d: st.integers(0, 4) for d in DRIVERS}),
        ),
        min_size=1,
        max_size=5,
    ),
    st.sets(volume_names, max_size=4),
    st.data(),
)
def test_the_attach_table_agrees_with_the_reference(
    nodes: list[tuple[list[set[str]], set[str], dict[str, int]]],
    new_volumes: set[str],
    data: st.DataObject,
) -> None:
    table = AttachTable(capacity=2)
    table.grow(8)
    for slot, (pods, attachments, limits) in enumerate(nodes):
        for i, volumes in enumerate(pods):
            table.set_pod(slot, f"p{i}", keys_of(volumes))
        table.set_attachments(slot, keys_of(attachments))
        table.set_limits(slot, {attach_limit_key(d): n for d, n in limits.items()})
    # A pod changes what it uses, or leaves, as claims get bound and pods go.
    slot = data.draw(st.integers(0, len(nodes) - 1))
    pods, attachments, limits = nodes[slot]
    if pods:
        i = data.draw(st.integers(0, len(pods) - 1))
        pods[i] = data.draw(st.sets(volume_names, max_size=3))
        table.set_pod(slot, f"p{i}", keys_of(pods[i]))
    candidates = np.zeros(8, dtype=bool)
    candidates[: len(nodes)] = True
    mask = table.exceeds_mask(keys_of(new_volumes), candidates)
    for slot, (pods, attachments, limits) in enumerate(nodes):
        by_pods: VolumeKeys = {}
        for volumes in pods:
            by_pods.update(keys_of(volumes))
        expected = bool(new_volumes) and exceeds(
            keys_of(new_volumes),
            by_pods,
            keys_of(attachments),
            {attach_limit_key(d): n for d, n in limits.items()},
        )
        assert bool(mask[slot]) == expected, slot
    assert not mask[len(nodes) :].any()
