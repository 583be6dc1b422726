"""VolumeBinding Reserve/Unreserve (assume.py) and PreBind (prebind.py): what is
assumed so later pods see it, what is restored, what PreBind writes, and how a poll
judges the PV controller's and provisioner's progress (binder_test.go's
AssumePodVolumes / BindPodVolumes / checkBindings families)."""

from __future__ import annotations

import pytest
from troupe.api.objects import Node, Pod
from troupe.api.volumes import ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, VolumeError
from troupe.plugins.volumebinding.assume import assume_pod_volumes, revert_assumed
from troupe.plugins.volumebinding.binder import find_pod_volumes
from troupe.plugins.volumebinding.caches import VolumeCaches
from troupe.plugins.volumebinding.claims import pre_filter
from troupe.plugins.volumebinding.model import ERR_BIND_CONFLICT, Listers, PodVolumes
from troupe.plugins.volumebinding.prebind import (
    TIMEOUT_MESSAGE,
    BindCheck,
    PreBindPlan,
    Progress,
    check_bindings,
    failure_message,
    plan,
    restore_unwritten,
)

from tests.plugins.builders import make_node, make_pod
from tests.plugins.storage_builders import make_class, make_pv, make_pvc, with_claims
from tests.plugins.volumebinding.helpers import listers_of

HOST = "kubernetes.io/hostname"
N1 = make_node().name("n1").label(HOST, "n1").obj()
N2 = make_node().name("n2").label(HOST, "n2").obj()
LOCAL = make_class("local").wait_for_first_consumer().no_provisioner().obj()
FAST = make_class("fast").wait_for_first_consumer().obj()


def pod(name: str, *claims: str) -> Pod:
    return with_claims(make_pod().name(name), *claims).obj()


def filtered(listers: Listers, the_pod: Pod, node: Node) -> PodVolumes:
    decision = pre_filter(the_pod, listers)
    assert decision.claims is not None, decision.status
    found = find_pod_volumes(decision.claims, node, listers)
    assert found.fits, found.reasons
    return found.volumes


# --- Reserve ----------------------------------------------------------------------------------


def test_a_static_pv_is_assumed_bound_to_its_claim() -> None:
    listers, caches = listers_of(
        LOCAL, make_pvc("data").cls("local").version("42").obj(), make_pv("pv-1").cls("local").obj()
    )
    volumes = filtered(listers, pod("p", "data"), N1)
    assumed = assume_pod_volumes(pod("p", "data"), "n1", volumes, caches)
    assert not assumed.all_bound
    pv = caches.get_volume("pv-1")
    assert pv is not None and pv is assumed.volumes.static_bindings[0].volume
    ref = pv.spec.claim_ref
    assert ref is not None
    assert (ref.kind, ref.api_version, ref.namespace, ref.name, ref.uid, ref.resource_version) == (
        "PersistentVolumeClaim", "v1", "default", "data", "uid-data", "42",
    )  # fmt: skip
    assert pv.metadata.annotations[ANN_BOUND_BY_CONTROLLER] == "yes"
    informer = caches.api_volume("pv-1")
    assert informer is not None and informer.spec.claim_ref is None


def test_the_next_pod_does_not_get_an_assumed_pv() -> None:
    listers, caches = listers_of(
        LOCAL,
        make_pvc("a").cls("local").obj(),
        make_pvc("b").cls("local").obj(),
        make_pv("pv-1").cls("local").obj(),
    )
    assume_pod_volumes(pod("p", "a"), "n1", filtered(listers, pod("p", "a"), N1), caches)
    decision = pre_filter(pod("q", "b"), listers)
    assert decision.claims is not None
    assert find_pod_volumes(decision.claims, N1, listers).reasons == (ERR_BIND_CONFLICT,)


def test_a_pre_bound_pv_gets_the_claims_uid_but_is_not_marked_bound_by_controller() -> None:
    listers, caches = listers_of(
        LOCAL,
        make_pvc("data").cls("local").obj(),
        make_pv("pv-1").cls("local").claim_ref("data").obj(),
    )
    assumed = assume_pod_volumes(
        pod("p", "data"), "n1", filtered(listers, pod("p", "data"), N1), caches
    )
    pv = assumed.volumes.static_bindings[0].volume
    assert pv.spec.claim_ref is not None and pv.spec.claim_ref.uid == "uid-data"
    assert ANN_BOUND_BY_CONTROLLER not in pv.metadata.annotations
    assert caches.pvs.is_assumed("pv-1")


def test_a_pv_already_bound_to_the_claim_is_not_assumed_again() -> None:
    listers, caches = listers_of(
        LOCAL,
        make_pvc("data").cls("local").obj(),
        make_pv("pv-1").cls("local").claim_ref("data", uid="uid-data")
        .annotation(ANN_BOUND_BY_CONTROLLER, "yes").obj(),
    )  # fmt: skip
    assumed = assume_pod_volumes(
        pod("p", "data"), "n1", filtered(listers, pod("p", "data"), N1), caches
    )
    assert len(assumed.volumes.static_bindings) == 1
    assert not caches.pvs.is_assumed("pv-1")


def test_a_claim_to_provision_is_assumed_with_the_selected_node() -> None:
    listers, caches = listers_of(FAST, make_pvc("shared").cls("fast").obj())
    assumed = assume_pod_volumes(
        pod("p", "shared"), "n2", filtered(listers, pod("p", "shared"), N2), caches
    )
    claim = caches.get_claim("default", "shared")
    assert claim is not None and claim.metadata.annotations[ANN_SELECTED_NODE] == "n2"
    assert assumed.volumes.dynamic_provisions[0].claim is claim
    # Another pod of the claim now fits only the selected node.
    decision = pre_filter(pod("q", "shared"), listers)
    assert decision.claims is not None
    assert find_pod_volumes(decision.claims, N1, listers).reasons == (ERR_BIND_CONFLICT,)
    assert find_pod_volumes(decision.claims, N2, listers).fits


def test_unreserve_restores_every_assumption() -> None:
    listers, caches = listers_of(
        LOCAL, FAST,
        make_pvc("a").cls("local").obj(), make_pv("pv-1").cls("local").obj(),
        make_pvc("b").cls("fast").obj(),
    )  # fmt: skip
    the_pod = pod("p", "a", "b")
    assumed = assume_pod_volumes(the_pod, "n1", filtered(listers, the_pod, N1), caches)
    revert_assumed(assumed.volumes, caches)
    assert not caches.pvs.is_assumed("pv-1") and not caches.pvcs.is_assumed("default/b")
    assert caches.get_volume("pv-1") is caches.api_volume("pv-1")


def test_a_pod_whose_claims_are_all_bound_assumes_nothing() -> None:
    _, caches = listers_of(
        LOCAL, make_pvc("data").cls("local").bound_to("pv-1").obj(), make_pv("pv-1").obj()
    )
    assumed = assume_pod_volumes(pod("p", "data"), "n1", PodVolumes(), caches)
    assert assumed.all_bound
    assert plan(assumed) is None


def test_a_refused_assumption_undoes_the_earlier_ones() -> None:
    listers, caches = listers_of(
        LOCAL, FAST,
        make_pvc("a").cls("local").obj(), make_pv("pv-1").cls("local").obj(),
        make_pvc("b").cls("fast").version("5").obj(),
    )  # fmt: skip
    the_pod = pod("p", "a", "b")
    volumes = filtered(listers, the_pod, N1)
    caches.pvcs.add(make_pvc("b").cls("fast").version("9").obj())  # the informer moved on
    with pytest.raises(VolumeError, match=r"is out of sync \(stored: 9, assume: 5\)"):
        assume_pod_volumes(the_pod, "n1", volumes, caches)
    assert not caches.pvs.is_assumed("pv-1")


# --- PreBind ----------------------------------------------------------------------------------


def reserved(
    *objects: object, claims: tuple[str, ...] = ("data",)
) -> tuple[PreBindPlan, VolumeCaches]:
    listers, caches = listers_of(LOCAL, FAST, *objects)  # type: ignore[arg-type]
    the_pod = pod("p", *claims)
    assumed = assume_pod_volumes(the_pod, "n1", filtered(listers, the_pod, N1), caches)
    the_plan = plan(assumed)
    assert the_plan is not None
    return the_plan, caches


def check(
    the_plan: PreBindPlan, caches: VolumeCaches, node: Node | None = N1, exists: bool = True
) -> BindCheck:
    return check_bindings(
        the_plan, caches, pod_name="p", pod_exists=exists, node_name="n1", node=node
    )


def test_prebind_writes_the_assumed_pvs_then_claims() -> None:
    the_plan, _ = reserved(
        make_pvc("a").cls("local").obj(), make_pv("pv-1").cls("local").obj(),
        make_pvc("b").cls("fast").obj(), claims=("a", "b"),
    )  # fmt: skip
    assert [pv.metadata.name for pv in the_plan.volumes] == ["pv-1"]
    assert [pvc.metadata.name for pvc in the_plan.claims] == ["b"]
    assert the_plan.claims[0].metadata.annotations[ANN_SELECTED_NODE] == "n1"


def test_a_static_binding_is_done_once_the_pv_controller_binds_the_claim() -> None:
    the_plan, caches = reserved(
        make_pvc("data").cls("local").obj(), make_pv("pv-1").cls("local").obj()
    )
    written = the_plan.volumes[0].model_copy(deep=True)
    written.metadata.resource_version = "2"
    the_plan = the_plan.written((written,), ())
    assert check(the_plan, caches).progress is Progress.PENDING  # informer has not seen it
    caches.pvs.add(written)
    assert check(the_plan, caches).progress is Progress.PENDING  # claim not bound yet
    caches.pvcs.add(make_pvc("data").cls("local").bound_to("pv-1").version("3").obj())
    assert check(the_plan, caches) == BindCheck(Progress.DONE)


def test_a_provisioned_claim_is_done_once_bound_to_a_pv_on_the_node() -> None:
    the_plan, caches = reserved(make_pvc("data").cls("fast").obj())
    written = the_plan.claims[0].model_copy(deep=True)
    written.metadata.resource_version = "2"
    the_plan = the_plan.written((), (written,))
    assert check(the_plan, caches).progress is Progress.PENDING  # our write not seen
    provisioned = make_pvc("data").cls("fast").selected_node("n1").bound_to("pvc-123").version("3")
    caches.pvcs.add(provisioned.obj())
    assert check(the_plan, caches).progress is Progress.PENDING  # the new PV not seen yet
    caches.pvs.add(make_pv("pvc-123").cls("fast").on_host("n1").obj())
    assert check(the_plan, caches).progress is Progress.DONE


FAILURES = [
    pytest.param(
        make_pvc("data").cls("fast").annotation("volume.kubernetes.io/storage-provisioner", "x"),
        'provisioning failed for PVC "data"',
        id="a provisioner that gave up removed selected-node",
    ),
    pytest.param(
        make_pvc("data").cls("fast"),
        'selectedNode annotation reset for PVC "data"',
        id="a claim left without any annotation",
    ),
    pytest.param(
        make_pvc("data").cls("fast").selected_node("n2"),
        'provisioning failed for PVC "data"',
        id="a claim selected for another node",
    ),
]


@pytest.mark.parametrize(("claim", "message"), FAILURES)
def test_a_failed_provisioning_fails_prebind(claim: object, message: str) -> None:
    the_plan, caches = reserved(make_pvc("data").cls("fast").obj())
    caches.pvcs.add(claim.version("7").obj())  # type: ignore[attr-defined]
    result = check(the_plan, caches)
    assert result == BindCheck(Progress.FAILED, message)
    assert failure_message(result) == f"binding volumes: {message}"


def test_a_provisioned_pv_that_excludes_the_node_fails() -> None:
    the_plan, caches = reserved(make_pvc("data").cls("fast").obj())
    caches.pvcs.add(
        make_pvc("data").cls("fast").selected_node("n1").bound_to("pv-x").version("3").obj()
    )
    caches.pvs.add(make_pv("pv-x").cls("fast").on_host("n2").obj())
    assert check(the_plan, caches) == BindCheck(
        Progress.FAILED,
        'pv "pv-x" node affinity doesn\'t match node "n1": no matching NodeSelectorTerms',
    )


def test_a_dropped_claim_ref_fails() -> None:
    the_plan, caches = reserved(
        make_pvc("data").cls("local").obj(), make_pv("pv-1").cls("local").obj()
    )
    caches.pvs.add(make_pv("pv-1").cls("local").version("5").obj())  # unbound by the controller
    assert check(the_plan, caches) == BindCheck(Progress.FAILED, 'ClaimRef got reset for pv "pv-1"')


def test_a_vanished_node_or_pod_fails() -> None:
    the_plan, caches = reserved(make_pvc("data").cls("fast").obj())
    assert check(the_plan, caches, node=None) == BindCheck(
        Progress.FAILED, 'failed to get node "n1": node "n1" not found'
    )
    assert check(the_plan, caches, exists=False) == BindCheck(
        Progress.FAILED, 'pod does not exist any more: pod "p" not found'
    )
    assert TIMEOUT_MESSAGE == "binding volumes: context deadline exceeded"


def test_a_failed_write_restores_what_was_not_written() -> None:
    the_plan, caches = reserved(
        make_pvc("a").cls("local").obj(), make_pv("pv-1").cls("local").obj(),
        make_pvc("b").cls("fast").obj(), claims=("a", "b"),
    )  # fmt: skip
    restore_unwritten(the_plan, volumes_written=1, claims_written=0, caches=caches)
    assert caches.pvs.is_assumed("pv-1")  # written: the informer will catch up
    assert not caches.pvcs.is_assumed("default/b")
