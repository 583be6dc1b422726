"""Storage models and the helpers every volume plugin shares (troupe/api/storage.py,
troupe/api/volumes.py)."""

from __future__ import annotations

import json

import pytest
from troupe.api.objects import Pod, Volume
from troupe.api.quantity import QuantityError
from troupe.api.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttachment,
)
from troupe.api.volumes import (
    StorageObjects,
    VolumeError,
    access_modes_fit,
    claim_class,
    claim_refs,
    ephemeral_owner_error,
    has_claims,
    is_delay_binding,
    is_fully_bound,
    is_volume_bound_to_claim,
    requested_nanos,
    topology_terms_match,
    volume_class,
    volume_fits_labels,
    volume_mode_mismatch,
)

from tests.plugins.builders import make_pod
from tests.plugins.storage_builders import (
    ebs_disk,
    make_class,
    make_pv,
    make_pvc,
    with_claims,
)

# --- parsing ----------------------------------------------------------------------------

POD_JSON = {
    "metadata": {"name": "trainer-0", "namespace": "ml", "uid": "u1"},
    "spec": {
        "containers": [{"name": "c"}],
        "volumes": [
            {"name": "kube-api-access-x", "projected": {"sources": [{"serviceAccountToken": {}}]}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-0", "readOnly": True}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "disk", "gcePersistentDisk": {"pdName": "pd-1", "readOnly": True}},
            {"name": "ebs", "awsElasticBlockStore": {"volumeID": "vol-1"}},
            {"name": "ceph", "rbd": {"monitors": ["m1", "m2"], "image": "img"}},
            {"name": "san", "iscsi": {"iqn": "iqn.2026-01.x", "targetPortal": "1.2.3.4", "lun": 2}},
            {"name": "inline", "csi": {"driver": "csi.example.com"}},
        ],
    },
}


def test_pod_volumes_parse_the_sources_the_plugins_read() -> None:
    volumes = Pod.model_validate_json(json.dumps(POD_JSON)).spec.volumes
    assert [v.name for v in volumes] == [
        "kube-api-access-x", "data", "scratch", "disk", "ebs", "ceph", "san", "inline",
    ]  # fmt: skip
    projected, data, scratch, disk, ebs, ceph, san, inline = volumes
    assert projected == Volume(name="kube-api-access-x")
    assert data.persistent_volume_claim is not None
    assert (data.persistent_volume_claim.claim_name, data.persistent_volume_claim.read_only) == (
        "data-0",
        True,
    )
    assert scratch.ephemeral is not None
    assert disk.gce_persistent_disk is not None and disk.gce_persistent_disk.pd_name == "pd-1"
    assert ebs.aws_elastic_block_store is not None
    assert ebs.aws_elastic_block_store.volume_id == "vol-1"
    assert ceph.rbd is not None and (ceph.rbd.monitors, ceph.rbd.pool) == (["m1", "m2"], "rbd")
    assert san.iscsi is not None and (san.iscsi.iqn, san.iscsi.lun) == ("iqn.2026-01.x", 2)
    assert inline.csi is not None and inline.csi.driver == "csi.example.com"


def test_a_pod_without_volumes_shares_the_empty_default() -> None:
    a = Pod.model_validate_json('{"metadata": {"name": "a"}}')
    b = Pod.model_validate_json('{"metadata": {"name": "b"}}')
    assert a.spec.volumes == ()
    assert a.spec.volumes is b.spec.volumes
    assert not has_claims(a)


STORAGE_JSON = [
    (
        PersistentVolume,
        {
            "metadata": {"name": "pv-1", "resourceVersion": "7"},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"],
                "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "ml", "name": "d"},
                "storageClassName": "local",
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}},
                "csi": {"driver": "csi.example.com", "volumeHandle": "h-1"},
                "persistentVolumeReclaimPolicy": "Delete",
            },
            "status": {"phase": "Bound"},
        },
    ),
    (
        PersistentVolumeClaim,
        {
            "metadata": {"name": "d", "namespace": "ml"},
            "spec": {
                "accessModes": ["ReadWriteOncePod"],
                "resources": {"requests": {"storage": 10737418240}},
                "storageClassName": "local",
                "volumeName": "pv-1",
            },
            "status": {"phase": "Bound"},
        },
    ),
    (
        StorageClass,
        {
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [
                {"key": "topology.kubernetes.io/zone", "values": ["a"]}]}],
        },
    ),
    (CSINode, {"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": "csi.example.com", "nodeID": "n1", "allocatable": {"count": 2}}]}}),
    (CSIDriver, {"metadata": {"name": "csi.example.com"}, "spec": {"storageCapacity": True}}),
    (CSIStorageCapacity, {"metadata": {"name": "c", "namespace": "kube-system"},
                          "storageClassName": "local", "capacity": "100Gi",
                          "nodeTopology": {"matchLabels": {"zone": "a"}}}),
    (VolumeAttachment, {"metadata": {"name": "va"}, "spec": {"attacher": "csi.example.com",
                        "nodeName": "n1", "source": {"persistentVolumeName": "pv-1"}},
                        "status": {"attached": True}}),
]  # fmt: skip


@pytest.mark.parametrize(("model", "raw"), STORAGE_JSON, ids=lambda v: getattr(v, "__name__", ""))
def test_storage_objects_round_trip_their_modelled_fields(
    model: type, raw: dict[str, object]
) -> None:
    parsed = model.model_validate_json(json.dumps({**raw, "extra": {"ignored": 1}}))
    again = model.model_validate(parsed.model_dump(exclude_none=True))
    assert again == parsed


def test_storage_defaults_are_what_the_api_server_fills_in() -> None:
    pv = PersistentVolume.model_validate({"metadata": {"name": "pv"}})
    assert pv.spec.persistent_volume_reclaim_policy == "Retain"
    assert pv.status.phase == "Pending"
    sc = StorageClass.model_validate({"metadata": {"name": "s"}})
    assert sc.volume_binding_mode is None  # upstream reports it; the API server defaults it
    pvc = PersistentVolumeClaim.model_validate(STORAGE_JSON[1][1])
    assert pvc.spec.resources.requests["storage"] == "10737418240"  # a bare number is a quantity


# --- a pod's claims -------------------------------------------------------------------------


def test_claim_refs_name_persistent_and_generic_ephemeral_claims_in_pod_order() -> None:
    pod = with_claims(make_pod().name("web-0"), "data", ephemeral=("cache",))
    pod.volume(ebs_disk("ebs", "vol-1"))
    refs = list(claim_refs(pod.obj()))
    assert [(r.claim_name, r.ephemeral) for r in refs] == [("data", False), ("web-0-cache", True)]
    assert has_claims(pod.obj())


@pytest.mark.parametrize(
    ("claim", "error"),
    [
        pytest.param(
            make_pvc("p-cache").owned_by("uid-p"), None, id="owned by the pod is its claim"
        ),
        pytest.param(
            make_pvc("p-cache").owned_by("uid-other"),
            "PVC default/p-cache was not created for pod default/p (pod is not owner)",
            id="owned by another pod is not",
        ),
        pytest.param(
            make_pvc("p-cache").owned_by("uid-p", controller=False),
            "PVC default/p-cache was not created for pod default/p (pod is not owner)",
            id="a non-controller owner reference is not ownership",
        ),
        pytest.param(
            make_pvc("p-cache").owned_by("uid-p").namespace("other"),
            "PVC other/p-cache was not created for pod default/p (pod is not owner)",
            id="a claim in another namespace is not the pod's",
        ),
    ],
)
def test_ephemeral_claims_must_be_controlled_by_their_pod(claim: object, error: str | None) -> None:
    pod = make_pod().name("p").obj()
    assert ephemeral_owner_error(pod, claim.obj()) == error  # type: ignore[attr-defined]


def test_the_beta_class_annotation_wins_over_the_field() -> None:
    pvc = make_pvc("c").cls("fast").annotation("volume.beta.kubernetes.io/storage-class", "slow")
    assert claim_class(pvc.obj()) == "slow"
    assert claim_class(make_pvc("c").cls(None).obj()) == ""
    pv = make_pv("v").cls("fast").annotation("volume.beta.kubernetes.io/storage-class", "slow")
    assert volume_class(pv.obj()) == "slow"


def test_a_claim_is_bound_only_with_volume_name_and_bind_completed() -> None:
    assert is_fully_bound(make_pvc("c").bound_to("pv").obj())
    assert not is_fully_bound(make_pvc("c").pre_bound_to("pv").obj())
    assert not is_fully_bound(make_pvc("c").annotation("pv.kubernetes.io/bind-completed", "").obj())


def test_an_invalid_storage_request_names_the_claim_and_field() -> None:
    with pytest.raises(QuantityError, match=r"persistentvolumeclaim default/c: spec.resources"):
        requested_nanos(make_pvc("c").request("ten gigs").obj())


# --- claim and volume facts -------------------------------------------------------------


@pytest.mark.parametrize(
    ("pv", "labels", "fits"),
    [
        pytest.param(make_pv("v"), {}, True, id="no affinity fits every node"),
        pytest.param(make_pv("v").on_host("n1"), {"kubernetes.io/hostname": "n1"}, True, id="host"),
        pytest.param(
            make_pv("v").on_host("n1"), {"kubernetes.io/hostname": "n2"}, False, id="other"
        ),
        pytest.param(
            make_pv("v").affinity([("zone", "In", ["a"])], [("zone", "In", ["b"])]),
            {"zone": "b"},
            True,
            id="terms are ORed",
        ),
        pytest.param(
            make_pv("v").affinity([("zone", "In", ["a"]), ("disk", "Exists", [])]),
            {"zone": "a"},
            False,
            id="expressions of a term are ANDed",
        ),
        pytest.param(make_pv("v").affinity(), {"zone": "a"}, False, id="required without terms"),
        pytest.param(
            make_pv("v").affinity([("zone", "In", [])]), {"zone": "a"}, False, id="unparsable term"
        ),
    ],
)
def test_pv_node_affinity_is_checked_against_node_labels(
    pv: object, labels: dict[str, str], fits: bool
) -> None:
    assert volume_fits_labels(pv.obj(), labels) is fits  # type: ignore[attr-defined]


def test_access_modes_volume_modes_and_claim_refs() -> None:
    rwo = make_pvc("c").modes("ReadWriteOnce")
    assert access_modes_fit(rwo.obj(), make_pv("v").modes("ReadWriteOnce", "ReadOnlyMany").obj())
    assert not access_modes_fit(rwo.obj(), make_pv("v").modes("ReadOnlyMany").obj())
    assert volume_mode_mismatch(make_pvc("c").block().obj(), make_pv("v").obj())
    assert not volume_mode_mismatch(make_pvc("c").obj(), make_pv("v").obj())
    claim = make_pvc("c").obj()
    assert is_volume_bound_to_claim(make_pv("v").claim_ref("c").obj(), claim)
    assert is_volume_bound_to_claim(make_pv("v").claim_ref("c", uid="uid-c").obj(), claim)
    assert not is_volume_bound_to_claim(make_pv("v").claim_ref("c", uid="other").obj(), claim)
    assert not is_volume_bound_to_claim(make_pv("v").claim_ref("c", namespace="x").obj(), claim)


def test_binding_mode_comes_from_the_claims_class() -> None:
    store = StorageObjects.of(
        make_class("wffc").wait_for_first_consumer().obj(),
        make_class("now").obj(),
        make_class("broken").no_binding_mode().obj(),
    )
    assert is_delay_binding(make_pvc("c").cls("wffc").obj(), store)
    assert not is_delay_binding(make_pvc("c").cls("now").obj(), store)
    assert not is_delay_binding(make_pvc("c").cls("missing").obj(), store)
    assert not is_delay_binding(make_pvc("c").cls(None).obj(), store)
    with pytest.raises(VolumeError, match='VolumeBindingMode not set for StorageClass "broken"'):
        is_delay_binding(make_pvc("c").cls("broken").obj(), store)


@pytest.mark.parametrize(
    ("terms", "labels", "matches"),
    [
        pytest.param((), {}, True, id="no allowed topologies allow every node"),
        pytest.param(({"zone": ["a", "b"]},), {"zone": "b"}, True, id="a value of the list"),
        pytest.param(({"zone": ["a"]},), {"zone": "c"}, False, id="a value outside"),
        pytest.param(({"zone": ["a"]},), {}, False, id="an unlabelled node"),
        pytest.param(({"zone": ["a"]}, {"zone": ["c"]}), {"zone": "c"}, True, id="terms ORed"),
        pytest.param(({"zone": ["a"], "rack": ["r1"]},), {"zone": "a"}, False, id="keys ANDed"),
        pytest.param(({"zone": []},), {"zone": "a"}, False, id="an unparsable term"),
    ],
)
def test_allowed_topologies_match_as_upstream(
    terms: tuple[dict[str, list[str]], ...], labels: dict[str, str], matches: bool
) -> None:
    storage_class = make_class("s").allowed(*terms).obj()
    assert topology_terms_match(storage_class.allowed_topologies, labels) is matches


def test_storage_objects_list_and_forget_by_key() -> None:
    claim = make_pvc("c").obj()
    store = StorageObjects.of(claim, make_pv("v").obj())
    assert store.get_claim("default", "c") is claim
    assert store.get_volume("v") is not None
    store.remove(claim)
    assert store.get_claim("default", "c") is None
