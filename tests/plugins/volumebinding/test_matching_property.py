"""Static PV matching invariants (troupe/plugins/volumebinding/matching.py), checked
against a brute-force chooser on small generated sets: no PV goes to two claims,
each claim gets the smallest PV that fits it among those left, and a claim goes
without a PV only when none fits."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.storage import PersistentVolume, PersistentVolumeClaim
from troupe.api.volumes import requested_nanos
from troupe.plugins.volumebinding.matching import match_volumes

from tests.plugins.storage_builders import make_pv, make_pvc

SIZES = ("1Gi", "2Gi", "5Gi", "10Gi", "10240Mi")
CLASSES = ("a", "b")
MODES = (("ReadWriteOnce",), ("ReadWriteOnce", "ReadOnlyMany"), ("ReadWriteMany",))
NODE = "n1"


@st.composite
def claims_and_volumes(
    draw: st.DrawFn,
) -> tuple[list[PersistentVolumeClaim], list[PersistentVolume], set[str]]:
    claims = []
    for i in range(draw(st.integers(1, 4))):
        builder = make_pvc(f"c{i}").cls(draw(st.sampled_from(CLASSES)))
        builder.request(draw(st.sampled_from(SIZES)))
        builder.modes(*draw(st.sampled_from(MODES[:2]))[:1])
        if draw(st.booleans()):
            builder.selector({"tier": draw(st.sampled_from(("gold", "silver")))})
        claims.append(builder.obj())
    volumes = []
    for i in range(draw(st.integers(0, 7))):
        builder = make_pv(f"pv{i}").cls(draw(st.sampled_from(CLASSES)))
        builder.capacity(draw(st.sampled_from(SIZES))).modes(*draw(st.sampled_from(MODES)))
        builder.phase(draw(st.sampled_from(("Available", "Available", "Released"))))
        if draw(st.booleans()):
            builder.label("tier", draw(st.sampled_from(("gold", "silver"))))
        owner = draw(st.sampled_from((None, None, "someone", *(c.metadata.name for c in claims))))
        if owner is not None:
            builder.claim_ref(owner)
        volumes.append(builder.obj())
    # The PVs whose affinity admits the node.
    admitted = {pv.metadata.name for pv in volumes if draw(st.booleans())}
    return claims, volumes, admitted


def _fits(pvc: PersistentVolumeClaim, pv: PersistentVolume, admitted: set[str]) -> bool:
    """Every condition of a match, written from the specification."""
    ref = pv.spec.claim_ref
    mine = ref is not None and ref.name == pvc.metadata.name
    if ref is not None and not mine:
        return False
    if requested_nanos(pvc) > requested_nanos_of(pv):
        return False
    if mine:
        return pv.metadata.name in admitted
    selector = pvc.spec.selector
    return (
        pv.status.phase == "Available"
        and pv.spec.storage_class_name == pvc.spec.storage_class_name
        and set(pvc.spec.access_modes) <= set(pv.spec.access_modes)
        and (selector is None or all(pv.metadata.labels.get(k) == v
                                     for k, v in selector.match_labels.items()))
        and pv.metadata.name in admitted
    )  # fmt: skip


def requested_nanos_of(pv: PersistentVolume) -> int:
    return requested_nanos(make_pvc("x").request(pv.spec.capacity["storage"]).obj())


def brute_force(
    claims: Sequence[PersistentVolumeClaim], volumes: Sequence[PersistentVolume], admitted: set[str]
) -> dict[str, str | None]:
    """Claims by ascending request (stable), each looking only at the PVs of its class
    not taken yet: a PV pre-bound to the claim (and large enough) is taken, or the
    claim gets nothing if that PV does not admit the node; otherwise the smallest
    fitting PV, ties by name."""
    taken: set[str] = set()
    chosen: dict[str, str | None] = {}
    for pvc in sorted(claims, key=requested_nanos):
        left = [
            pv for pv in volumes
            if pv.metadata.name not in taken
            and pv.spec.storage_class_name == pvc.spec.storage_class_name
        ]  # fmt: skip
        pre_bound = [
            pv for pv in left
            if pv.spec.claim_ref is not None and pv.spec.claim_ref.name == pvc.metadata.name
            and requested_nanos_of(pv) >= requested_nanos(pvc)
        ]  # fmt: skip
        if pre_bound:
            pv = min(pre_bound, key=lambda p: p.metadata.name)
            choice = pv.metadata.name if pv.metadata.name in admitted else None
        else:
            fitting = [pv for pv in left if _fits(pvc, pv, admitted)]
            best = min(
                fitting, key=lambda p: (requested_nanos_of(p), p.metadata.name), default=None
            )
            choice = None if best is None else best.metadata.name
        chosen[pvc.metadata.name] = choice
        if choice is not None:
            taken.add(choice)
    return chosen


@settings(max_examples=400, deadline=None)
@given(claims_and_volumes())
def test_static_matching_agrees_with_a_brute_force_chooser(
    case: tuple[list[PersistentVolumeClaim], list[PersistentVolume], set[str]],
) -> None:
    claims, volumes, admitted = case
    by_class: dict[str, list[PersistentVolume]] = {}
    for pv in sorted(volumes, key=lambda p: p.metadata.name):
        by_class.setdefault(pv.spec.storage_class_name, []).append(pv)
    match = match_volumes(claims, by_class, lambda pv: pv.metadata.name in admitted)

    names = [b.volume.metadata.name for b in match.bindings]
    assert len(names) == len(set(names)), "a PV went to two claims"
    got = {b.claim.metadata.name: b.volume.metadata.name for b in match.bindings}
    got.update({c.metadata.name: None for c in match.unmatched})  # type: ignore[misc]
    assert got == brute_force(claims, volumes, admitted)
    assert match.all_found == (not match.unmatched)
