"""VolumeBinding PreFilter (troupe/plugins/volumebinding/claims.py): which claims make a
pod unschedulable before any node is looked at, with upstream's messages, and how
the usable ones are sorted (upstream volume_binding_test.go's PreFilter families)."""

from __future__ import annotations

import pytest
from troupe.api.objects import Pod
from troupe.api.status import Code
from troupe.api.volumes import StorageObject
from troupe.plugins.volumebinding.claims import pre_filter

from tests.plugins.builders import make_pod
from tests.plugins.storage_builders import ebs_disk, make_class, make_pv, make_pvc, with_claims
from tests.plugins.volumebinding.helpers import listers_of

WFFC = make_class("wffc").wait_for_first_consumer().obj()
IMMEDIATE = make_class("immediate").obj()
CLASSES: tuple[StorageObject, ...] = (WFFC, IMMEDIATE)


def pod(*claims: str, ephemeral: tuple[str, ...] = ()) -> Pod:
    return with_claims(make_pod().name("p").uid("uid-p"), *claims, ephemeral=ephemeral).obj()


UNRESOLVABLE_CASES = [
    pytest.param(pod("nope"), [], 'persistentvolumeclaim "nope" not found', id="a missing claim"),
    pytest.param(
        pod("a", "b"),
        [make_pvc("a").cls("wffc").bound_to("pv-a").obj()],
        'persistentvolumeclaim "b" not found',
        id="the first missing claim of several",
    ),
    pytest.param(
        pod(ephemeral=("scratch",)),
        [],
        'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"',
        id="a generic ephemeral claim not created yet",
    ),
    pytest.param(
        pod(ephemeral=("scratch",)),
        [make_pvc("p-scratch").cls("wffc").owned_by("uid-someone-else").obj()],
        "PVC default/p-scratch was not created for pod default/p (pod is not owner)",
        id="an ephemeral claim owned by another pod",
    ),
    pytest.param(
        pod("data"),
        [make_pvc("data").cls("wffc").pre_bound_to("pv-gone").lost().obj()],
        'persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-gone"',
        id="a lost claim",
    ),
    pytest.param(
        pod("data"),
        [make_pvc("data").cls("wffc").deleting().obj()],
        'persistentvolumeclaim "data" is being deleted',
        id="a claim being deleted",
    ),
    pytest.param(
        pod("data"),
        [make_pvc("data").cls("immediate").obj()],
        "pod has unbound immediate PersistentVolumeClaims",
        id="an unbound claim of an Immediate class",
    ),
    pytest.param(
        pod("data"),
        [make_pvc("data").cls(None).obj()],
        "pod has unbound immediate PersistentVolumeClaims",
        id="an unbound claim without a class is Immediate",
    ),
    pytest.param(
        pod("data"),
        [make_pvc("data").cls("no-such-class").obj()],
        "pod has unbound immediate PersistentVolumeClaims",
        id="an unbound claim of a missing class is Immediate",
    ),
    pytest.param(
        pod("data"),
        [make_pvc("data").cls("wffc").pre_bound_to("pv-1").obj()],
        "pod has unbound immediate PersistentVolumeClaims",
        id="a pre-bound claim of a WaitForFirstConsumer class counts as Immediate",
    ),
]


@pytest.mark.parametrize(("the_pod", "objects", "message"), UNRESOLVABLE_CASES)
def test_unusable_claims_are_unschedulable_and_unresolvable(
    the_pod: Pod, objects: list[StorageObject], message: str
) -> None:
    listers, _ = listers_of(*CLASSES, *objects)
    decision = pre_filter(the_pod, listers)
    assert decision.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert decision.status.reasons == (message,)
    assert decision.claims is None


def test_a_pod_without_claims_is_skipped() -> None:
    listers, _ = listers_of(*CLASSES)
    assert pre_filter(make_pod().obj(), listers).status.code is Code.SKIP
    in_tree_only = make_pod().volume(ebs_disk("ebs", "vol-1")).obj()
    assert pre_filter(in_tree_only, listers).status.code is Code.SKIP


def test_a_class_without_binding_mode_is_an_error() -> None:
    listers, _ = listers_of(
        make_class("broken").no_binding_mode().obj(), make_pvc("data").cls("broken").obj()
    )
    decision = pre_filter(pod("data"), listers)
    assert decision.status.code is Code.ERROR
    assert decision.status.message == 'VolumeBindingMode not set for StorageClass "broken"'


def test_claims_are_sorted_into_bound_and_wait_for_first_consumer() -> None:
    pvs = [make_pv("pv-1").cls("wffc").obj(), make_pv("pv-2").cls("wffc").obj()]
    listers, _ = listers_of(
        *CLASSES,
        *pvs,
        make_pvc("bound").cls("immediate").bound_to("pv-0").obj(),
        make_pvc("later").cls("wffc").obj(),
        make_pvc("p-cache").cls("wffc").owned_by("uid-p").obj(),
    )
    decision = pre_filter(pod("bound", "later", ephemeral=("cache",)), listers)
    assert decision.status.is_success
    claims = decision.claims
    assert claims is not None
    assert [c.metadata.name for c in claims.bound] == ["bound"]
    assert [c.metadata.name for c in claims.delayed] == ["later", "p-cache"]
    assert claims.immediate == ()
    # The PVs of the delayed claims' class are read once, for every node.
    assert {name: [pv.metadata.name for pv in pvs] for name, pvs in claims.candidates.items()} == {
        "wffc": ["pv-1", "pv-2"]
    }


@pytest.mark.parametrize(
    "claim",
    [
        pytest.param(make_pvc("data").cls("wffc").selected_node("n1"), id="with a selected node"),
        pytest.param(
            make_pvc("data").cls("wffc").annotation("pv.kubernetes.io/bind-completed", "y"),
            id="bind-completed without a volumeName",
        ),
    ],
)
def test_unbound_wait_for_first_consumer_claims_are_left_to_filter(claim: object) -> None:
    listers, _ = listers_of(*CLASSES, claim.obj())  # type: ignore[attr-defined]
    claims = pre_filter(pod("data"), listers).claims
    assert claims is not None and [c.metadata.name for c in claims.delayed] == ["data"]
