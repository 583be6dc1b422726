"""The columnar VolumeBinding Filter (troupe/plugins/volumebinding/filter_batch.py) gives
every candidate node the verdict the per-node reference (binder.find_pod_volumes)
gives it, on generated clusters; and the node masks it is built from agree with the
per-node predicates."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Node, Pod
from troupe.api.selectors import label_selector_matches
from troupe.api.volumes import (
    StorageObject,
    VolumeError,
    topology_terms_match,
    volume_fits_labels,
)
from troupe.plugins.volumebinding.binder import find_pod_volumes
from troupe.plugins.volumebinding.claims import pre_filter
from troupe.plugins.volumebinding.filter_batch import filter_volumes
from troupe.plugins.volumebinding.model import REASON_ORDER, PodVolumes
from troupe.plugins.volumebinding.topology import (
    VolumeFits,
    label_selector_mask,
    topology_terms_mask,
)

from tests.plugins.builders import label_selector, make_node, make_pod, table_of
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
SIZES = ("1Gi", "5Gi", "10Gi")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[StorageObject], Pod, list[bool]]:
    n = draw(st.integers(1, 6))
    nodes = []
    for i in range(n):
        builder = make_node().name(f"n{i}").label(HOST, f"n{i}")
        zone = draw(st.sampled_from(("a", "b", None)))
        if zone is not None:
            builder.label(ZONE, zone)
        nodes.append(builder.obj())
    host = st.sampled_from([f"n{i}" for i in range(n + 1)])  # n{n}: no such node
    objects: list[StorageObject] = [
        make_class("local").wait_for_first_consumer().no_provisioner().obj(),
        make_class("fast")
        .wait_for_first_consumer()
        .allowed(*draw(st.sampled_from(((), ({ZONE: ["a"]},), ({ZONE: ["b"]}, {ZONE: ["a"]})))))
        .obj(),
        csi_driver("csi.example.com", storage_capacity=draw(st.booleans())),
    ]
    for i in range(draw(st.integers(0, 3))):
        topology = draw(st.sampled_from(({ZONE: "a"}, {ZONE: "b"}, None, {})))
        objects.append(
            capacity(f"cap{i}", "fast", topology=topology, capacity=draw(st.sampled_from(SIZES)))
        )
    for i in range(draw(st.integers(0, 6))):
        pv = make_pv(f"pv{i}").cls(draw(st.sampled_from(("local", "fast"))))
        pv.capacity(draw(st.sampled_from(SIZES)))
        kind = draw(st.sampled_from(("none", "host", "zone", "zones", "host+zone")))
        if kind == "host":
            pv.on_host(draw(host))
        elif kind == "zone":
            pv.affinity([(ZONE, "In", ["a"])])
        elif kind == "zones":
            pv.affinity([(ZONE, "In", ["a"])], [(HOST, "In", [draw(host)])])
        elif kind == "host+zone":
            pv.affinity([(HOST, "In", [draw(host)]), (ZONE, "In", ["b"])])
        if draw(st.booleans()):
            pv.claim_ref(draw(st.sampled_from(("c0", "c1", "other"))))
        objects.append(pv.obj())
    claims = []
    for i in range(draw(st.integers(1, 3))):
        name = f"c{i}"
        claims.append(name)
        pvc = make_pvc(name).request(draw(st.sampled_from(SIZES)))
        pvc.cls(draw(st.sampled_from(("local", "fast")))).modes("ReadWriteOnce")
        kind = draw(st.sampled_from(("delayed", "delayed", "bound", "selected")))
        if kind == "bound":
            pvc.bound_to(f"pv{draw(st.integers(0, 6))}")
        elif kind == "selected":
            pvc.selected_node(draw(host))
        objects.append(pvc.obj())
    pod = with_claims(make_pod().name("p"), *claims).obj()
    candidates = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return nodes, objects, pod, candidates


def _names(volumes: PodVolumes) -> tuple[object, ...]:
    return (
        tuple((b.claim.metadata.name, b.volume.metadata.name) for b in volumes.static_bindings),
        tuple(
            (p.claim.metadata.name, p.capacity.metadata.name if p.capacity else None)
            for p in volumes.dynamic_provisions
        ),
    )


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_the_columnar_filter_agrees_with_the_per_node_reference(
    cluster: tuple[list[Node], list[StorageObject], Pod, list[bool]],
) -> None:
    nodes, objects, pod, chosen = cluster
    listers, _ = listers_of(*objects)
    decision = pre_filter(pod, listers)
    if decision.claims is None:
        return
    table = table_of(nodes, capacity=8)
    candidates = np.zeros(table.capacity, dtype=bool)
    for node, pick in zip(nodes, chosen, strict=True):
        candidates[table.slot(node.metadata.name)] = pick  # type: ignore[index]
    batch = filter_volumes(decision.claims, table, candidates, listers, VolumeFits())

    errors = False
    for node, pick in zip(nodes, chosen, strict=True):
        slot = table.slot(node.metadata.name)
        assert slot is not None
        if not pick:
            assert not batch.feasible[slot]
            continue
        try:
            expected = find_pod_volumes(decision.claims, node, listers)
        except VolumeError:
            errors = True
            assert not batch.feasible[slot]
            continue
        reasons = tuple(r for r in REASON_ORDER if batch.reasons[r][slot])
        assert reasons == expected.reasons, node.metadata.name
        assert bool(batch.feasible[slot]) == expected.fits
        if expected.fits:
            assert _names(batch.volumes_for(slot)) == _names(expected.volumes)
    assert (batch.error is not None) == errors
    assert not batch.feasible[~table.present].any()


# --- the masks ------------------------------------------------------------------------------

label_values = st.sampled_from(("a", "b", "c", None))


@st.composite
def labelled_tables(draw: st.DrawFn) -> tuple[NodeTable, list[Node]]:
    nodes = []
    for i in range(draw(st.integers(1, 6))):
        builder = make_node().name(f"n{i}")
        for key in ("zone", "rack"):
            value = draw(label_values)
            if value is not None:
                builder.label(key, value)
        nodes.append(builder.obj())
    return table_of(nodes, capacity=8), nodes


exprs = st.lists(
    st.tuples(
        st.sampled_from(("zone", "rack")),
        st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist")),
        st.lists(st.sampled_from(("a", "b", "c")), max_size=2),
    ),
    max_size=2,
)


@settings(max_examples=200, deadline=None)
@given(labelled_tables(), st.lists(exprs, max_size=3), st.lists(exprs, max_size=2))
def test_masks_agree_with_the_per_node_predicates(
    tabled: tuple[NodeTable, list[Node]],
    terms: list[list[tuple[str, str, list[str]]]],
    selector_exprs: list[list[tuple[str, str, list[str]]]],
) -> None:
    table, nodes = tabled
    pv = make_pv("pv").affinity(*terms).obj() if terms else make_pv("pv").obj()
    fit = VolumeFits().fit(table, pv).mask(table.capacity)
    topology = [{key: values for key, op, values in term if op == "In"} for term in terms if term]
    storage_class = make_class("s").allowed(*topology).obj()
    topo = topology_terms_mask(table, storage_class.allowed_topologies)
    selector = label_selector({}, *[e for term in selector_exprs for e in term])
    selected = label_selector_mask(table, selector)
    for node in nodes:
        slot = table.slot(node.metadata.name)
        assert slot is not None
        labels = node.metadata.labels
        assert bool(fit[slot]) == volume_fits_labels(pv, labels)
        assert bool(topo[slot]) == topology_terms_match(storage_class.allowed_topologies, labels)
        assert bool(selected[slot]) == label_selector_matches(selector, labels)
