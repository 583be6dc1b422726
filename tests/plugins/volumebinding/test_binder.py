"""VolumeBinding Filter on one node (troupe/plugins/volumebinding/binder.py): bound PVs'
node affinity, static PV matching, provisioning and storage capacity, with
upstream's reasons (binder_test.go's FindPodVolumes families, our own cases)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from troupe.api.objects import Node
from troupe.api.volumes import StorageObject, VolumeError
from troupe.plugins.volumebinding.binder import find_pod_volumes
from troupe.plugins.volumebinding.claims import pre_filter
from troupe.plugins.volumebinding.model import (
    ERR_BIND_CONFLICT,
    ERR_NODE_CONFLICT,
    ERR_NOT_ENOUGH_SPACE,
    ERR_PV_NOT_EXIST,
    NodeVolumes,
)

from tests.plugins.builders import make_node, make_pod
from tests.plugins.storage_builders import (
    capacity,
    csi_driver,
    make_class,
    make_pv,
    make_pvc,
    with_claims,
)
from tests.plugins.volumebinding.helpers import listers_of

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(name: str, zone: str = "a") -> Node:
    return make_node().name(name).label(HOST, name).label(ZONE, zone).obj()


NODES = [node("n1", "a"), node("n2", "b")]
LOCAL = make_class("local").wait_for_first_consumer().no_provisioner().obj()
FAST = make_class("fast").wait_for_first_consumer().provisioner("csi.example.com").obj()
CLASSES: tuple[StorageObject, ...] = (LOCAL, FAST)


@dataclass
class Case:
    claims: list[str]
    objects: list[StorageObject]
    # node name -> reasons (all nodes of NODES must be listed)
    reasons: dict[str, tuple[str, ...]]
    # node name -> {claim: pv} static bindings expected there
    bindings: dict[str, dict[str, str]] = field(default_factory=dict)
    # node name -> claims provisioned there
    provisions: dict[str, list[str]] = field(default_factory=dict)


def wffc(name: str, size: str = "10Gi", cls: str = "local") -> StorageObject:
    return make_pvc(name).cls(cls).request(size).modes("ReadWriteOnce").obj()


def pv(name: str, size: str = "10Gi", cls: str = "local") -> object:
    return make_pv(name).cls(cls).capacity(size).modes("ReadWriteOnce")


BOTH_FIT: dict[str, tuple[str, ...]] = {"n1": (), "n2": ()}

CASES = [
    # --- bound claims ----------------------------------------------------------------
    pytest.param(
        Case(
            ["data"],
            [make_pvc("data").cls("local").bound_to("pv-1").obj(), pv("pv-1").on_host("n1").obj()],
            {"n1": (), "n2": (ERR_NODE_CONFLICT,)},
        ),
        id="a bound local PV admits only its node",
    ),
    pytest.param(
        Case(
            ["data"],
            [make_pvc("data").cls("local").bound_to("pv-gone").obj()],
            {"n1": (ERR_PV_NOT_EXIST,), "n2": (ERR_PV_NOT_EXIST,)},
        ),
        id="a claim bound to a missing PV rejects every node",
    ),
    pytest.param(
        Case(
            ["a", "b"],
            [
                make_pvc("a").cls("local").bound_to("pv-a").obj(),
                make_pvc("b").cls("local").bound_to("pv-gone").obj(),
                pv("pv-a").on_host("n1").obj(),
            ],
            {"n1": (ERR_PV_NOT_EXIST,), "n2": (ERR_NODE_CONFLICT,)},
        ),
        id="the first bad bound claim decides a node's reason",
    ),
    pytest.param(
        Case(
            ["data"],
            [
                make_pvc("data").cls("local").bound_to("pv-1").obj(),
                pv("pv-1").affinity([(ZONE, "In", ["a"])], [(ZONE, "In", ["b"])]).obj(),
            ],
            BOTH_FIT,
        ),
        id="a bound PV admitting two zones admits both",
    ),
    # --- static matching -------------------------------------------------------------
    pytest.param(
        Case(
            ["data"],
            [wffc("data", "8Gi"), pv("pv-5", "5Gi").obj(), pv("pv-20", "20Gi").obj(),
             pv("pv-10", "10Gi").obj()],
            BOTH_FIT,
            bindings={"n1": {"data": "pv-10"}, "n2": {"data": "pv-10"}},
        ),
        id="the smallest PV that fits is chosen",
    ),
    pytest.param(
        Case(["data"], [wffc("data", "20Gi"), pv("pv-10", "10Gi").obj()],
             {"n1": (ERR_BIND_CONFLICT,), "n2": (ERR_BIND_CONFLICT,)}),
        id="a PV too small does not fit and the class cannot provision",
    ),
    pytest.param(
        Case(["data"], [wffc("data"), pv("pv-1", cls="other").obj()],
             {"n1": (ERR_BIND_CONFLICT,), "n2": (ERR_BIND_CONFLICT,)}),
        id="a PV of another class is not offered",
    ),
    pytest.param(
        Case(["data"], [wffc("data"), pv("pv-1").phase("Released").obj()],
             {"n1": (ERR_BIND_CONFLICT,), "n2": (ERR_BIND_CONFLICT,)}),
        id="a PV that is not Available is not offered",
    ),
    pytest.param(
        Case(["data"], [wffc("data"), pv("pv-1").claim_ref("someone-else").obj()],
             {"n1": (ERR_BIND_CONFLICT,), "n2": (ERR_BIND_CONFLICT,)}),
        id="a PV claimed by another claim is not offered",
    ),
    pytest.param(
        Case(["data"], [wffc("data"), pv("pv-1").deleting().obj()],
             {"n1": (ERR_BIND_CONFLICT,), "n2": (ERR_BIND_CONFLICT,)}),
        id="a PV being deleted is not offered",
    ),
    pytest.param(
        Case(["data"], [wffc("data"), pv("pv-1").block().obj()],
             {"n1": (ERR_BIND_CONFLICT,), "n2": (ERR_BIND_CONFLICT,)}),
        id="a Block PV does not fit a Filesystem claim",
    ),
    pytest.param(
        Case(["data"], [wffc("data"), pv("pv-1").modes("ReadOnlyMany").obj()],
             {"n1": (ERR_BIND_CONFLICT,), "n2": (ERR_BIND_CONFLICT,)}),
        id="a PV must offer the claim's access modes",
    ),
    pytest.param(
        Case(
            ["data"],
            [make_pvc("data").cls("local").request("1Gi").selector({"tier": "gold"}).obj(),
             pv("pv-silver").label("tier", "silver").obj(),
             pv("pv-gold", "50Gi").label("tier", "gold").obj()],
            BOTH_FIT,
            bindings={"n1": {"data": "pv-gold"}, "n2": {"data": "pv-gold"}},
        ),
        id="the claim's selector must match the PV's labels",
    ),
    pytest.param(
        Case(
            ["data"],
            [wffc("data", "1Gi"), pv("pv-small", "1Gi").obj(),
             pv("pv-mine", "100Gi").claim_ref("data").phase("Pending").obj()],
            BOTH_FIT,
            bindings={"n1": {"data": "pv-mine"}, "n2": {"data": "pv-mine"}},
        ),
        id="a PV pre-bound to the claim is taken over a smaller one",
    ),
    pytest.param(
        Case(
            ["data"],
            [wffc("data", "1Gi"), pv("pv-small", "1Gi").obj(),
             pv("pv-mine", "100Gi").claim_ref("data").on_host("n1").obj()],
            {"n1": (), "n2": (ERR_BIND_CONFLICT,)},
            bindings={"n1": {"data": "pv-mine"}},
        ),
        id="a pre-bound PV that excludes the node leaves the claim without a match there",
    ),
    pytest.param(
        Case(
            ["big", "small"],
            [wffc("big", "8Gi"), wffc("small", "5Gi"), pv("pv-10", "10Gi").obj(),
             pv("pv-6", "6Gi").obj()],
            BOTH_FIT,
            bindings={"n1": {"small": "pv-6", "big": "pv-10"},
                      "n2": {"small": "pv-6", "big": "pv-10"}},
        ),
        id="claims are matched smallest request first, each PV to one claim",
    ),
    pytest.param(
        Case(
            ["one", "two"],
            [wffc("one", "5Gi"), wffc("two", "5Gi"), pv("pv-10", "10Gi").obj()],
            {"n1": (ERR_BIND_CONFLICT,), "n2": (ERR_BIND_CONFLICT,)},
        ),
        id="a PV chosen for one claim of the pod is not offered to the next",
    ),
    pytest.param(
        Case(["data"], [wffc("data"), pv("pv-1").on_host("n2").obj()],
             {"n1": (ERR_BIND_CONFLICT,), "n2": ()}, bindings={"n2": {"data": "pv-1"}}),
        id="a local PV fits only its node",
    ),
    pytest.param(
        Case(
            ["bound", "data"],
            [make_pvc("bound").cls("local").bound_to("pv-b").obj(),
             pv("pv-b").on_host("n1").claim_ref("bound").phase("Bound").obj(),
             wffc("data"), pv("pv-1").on_host("n2").claim_ref("x").obj()],
            {"n1": (ERR_BIND_CONFLICT,), "n2": (ERR_NODE_CONFLICT, ERR_BIND_CONFLICT)},
        ),
        id="bound and unbound reasons accumulate in upstream's order",
    ),
    # --- selected node -----------------------------------------------------------------
    pytest.param(
        Case(["data"], [make_pvc("data").cls("fast").request("1Gi").selected_node("n2").obj(),
                        pv("pv-1", cls="fast").obj()],
             {"n1": (ERR_BIND_CONFLICT,), "n2": ()}, provisions={"n2": ["data"]}),
        id="a claim whose selected node is another node rejects this one",
    ),
    # --- provisioning --------------------------------------------------------------------
    pytest.param(
        Case(["data"], [wffc("data", cls="fast")], BOTH_FIT,
             provisions={"n1": ["data"], "n2": ["data"]}),
        id="without a static PV the class provisions",
    ),
    pytest.param(
        Case(["data"],
             [make_class("empty").wait_for_first_consumer().provisioner("").obj(),
              wffc("data", cls="empty")],
             {"n1": (ERR_BIND_CONFLICT,), "n2": (ERR_BIND_CONFLICT,)}),
        id="a class with an empty provisioner cannot provision",
    ),
    pytest.param(
        Case(["data"],
             [make_class("zonal").wait_for_first_consumer().allowed({ZONE: ["b"]}).obj(),
              wffc("data", cls="zonal")],
             {"n1": (ERR_BIND_CONFLICT,), "n2": ()}, provisions={"n2": ["data"]}),
        id="allowedTopologies keep provisioning to their zones",
    ),
    pytest.param(
        Case(["local", "fresh"],
             [wffc("local"), pv("pv-1").on_host("n1").obj(), wffc("fresh", cls="fast")],
             {"n1": (), "n2": (ERR_BIND_CONFLICT,)},
             bindings={"n1": {"local": "pv-1"}}, provisions={"n1": ["fresh"]}),
        id="one claim bound statically and another provisioned on the same node",
    ),
    # --- storage capacity ----------------------------------------------------------------
    pytest.param(
        Case(["data"],
             [csi_driver("csi.example.com", storage_capacity=True), wffc("data", "10Gi", "fast"),
              capacity("cap-a", "fast", topology={ZONE: "a"}, capacity="20Gi")],
             {"n1": (), "n2": (ERR_NOT_ENOUGH_SPACE,)}, provisions={"n1": ["data"]}),
        id="a tracked driver provisions only where a capacity of the class has room",
    ),
    pytest.param(
        Case(["data"],
             [csi_driver("csi.example.com", storage_capacity=True), wffc("data", "10Gi", "fast"),
              capacity("cap-a", "fast", topology={ZONE: "a"}, capacity="100Gi", maximum="5Gi"),
              capacity("cap-b", "fast", topology={ZONE: "b"}, capacity="5Gi", maximum="10Gi")],
             {"n1": (ERR_NOT_ENOUGH_SPACE,), "n2": ()}, provisions={"n2": ["data"]}),
        id="maximumVolumeSize, when set, is the limit rather than capacity",
    ),
    pytest.param(
        Case(["data"],
             [csi_driver("csi.example.com", storage_capacity=True), wffc("data", "10Gi", "fast"),
              capacity("other", "slow", topology={ZONE: "a"}, capacity="100Gi"),
              capacity("nowhere", "fast", topology=None, capacity="100Gi")],
             {"n1": (ERR_NOT_ENOUGH_SPACE,), "n2": (ERR_NOT_ENOUGH_SPACE,)}),
        id="capacities of another class, or without node topology, do not count",
    ),
    pytest.param(
        Case(["data"],
             [csi_driver("csi.example.com", storage_capacity=False), wffc("data", "10Gi", "fast")],
             BOTH_FIT, provisions={"n1": ["data"], "n2": ["data"]}),
        id="a driver that does not track capacity is not checked",
    ),
    pytest.param(
        Case(["data"],
             [csi_driver("csi.example.com", storage_capacity=True),
              make_pvc("data").cls("fast").obj()],
             BOTH_FIT, provisions={"n1": ["data"], "n2": ["data"]}),
        id="a claim without a storage request is not checked",
    ),
    pytest.param(
        Case(["data"],
             [csi_driver("csi.example.com", storage_capacity=True), wffc("data", "10Gi", "fast"),
              make_pvc("x").obj(),
              capacity("cap-a", "fast", topology={ZONE: "a"}, capacity="20Gi")],
             {"n1": (), "n2": (ERR_NOT_ENOUGH_SPACE,)}, provisions={"n1": ["data"]}),
        id="storage capacity is checked per claim and node",
    ),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_find_pod_volumes(case: Case) -> None:
    listers, _ = listers_of(*CLASSES, *case.objects)
    pod = with_claims(make_pod().name("p"), *case.claims).obj()
    decision = pre_filter(pod, listers)
    assert decision.claims is not None, decision.status
    for each in NODES:
        found = find_pod_volumes(decision.claims, each, listers)
        name = each.metadata.name
        assert found.reasons == case.reasons[name], name
        if found.fits:
            _assert_volumes(found, case.bindings.get(name, {}), case.provisions.get(name, []))


def _assert_volumes(found: NodeVolumes, bindings: dict[str, str], provisions: list[str]) -> None:
    static = {b.claim.metadata.name: b.volume.metadata.name for b in found.volumes.static_bindings}
    assert static == bindings
    assert [p.claim.metadata.name for p in found.volumes.dynamic_provisions] == provisions


def test_the_capacity_that_admitted_a_claim_is_kept_for_scoring() -> None:
    listers, _ = listers_of(
        *CLASSES,
        csi_driver("csi.example.com", storage_capacity=True),
        wffc("data", "10Gi", "fast"),
        capacity("cap-a1", "fast", topology={ZONE: "a"}, capacity="5Gi"),
        capacity("cap-a2", "fast", topology={ZONE: "a"}, capacity="50Gi"),
    )
    decision = pre_filter(with_claims(make_pod().name("p"), "data").obj(), listers)
    assert decision.claims is not None
    found = find_pod_volumes(decision.claims, NODES[0], listers)
    (provision,) = found.volumes.dynamic_provisions
    assert provision.capacity is not None and provision.capacity.metadata.name == "cap-a2"


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        pytest.param(
            [make_pvc("data").cls("local").raw_selector(
                make_pvc("x").selector({"bad key!": "v"}).obj().spec.selector  # type: ignore[arg-type]
            ).obj()],
            "error creating internal label selector for claim: default/data: ",
            id="a claim selector that does not parse",
        ),
    ],
)  # fmt: skip
def test_errors_fail_the_cycle(objects: list[StorageObject], message: str) -> None:
    listers, _ = listers_of(*CLASSES, *objects)
    decision = pre_filter(with_claims(make_pod().name("p"), "data").obj(), listers)
    assert decision.claims is not None
    with pytest.raises(VolumeError, match=message):
        find_pod_volumes(decision.claims, NODES[0], listers)


def test_a_class_deleted_after_prefilter_is_an_error() -> None:
    listers, _ = listers_of(*CLASSES, wffc("data", cls="fast"))
    decision = pre_filter(with_claims(make_pod().name("p"), "data").obj(), listers)
    assert decision.claims is not None
    listers.classes.remove(FAST)  # type: ignore[attr-defined]
    with pytest.raises(VolumeError, match='failed to find storage class "fast"'):
        find_pod_volumes(decision.claims, NODES[0], listers)
