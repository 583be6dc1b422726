"""Properties of the allocator on random tiny instances, against an independent checker
and a brute-force search (tests/plugins/dynamicresources/brute.py):

- whatever it returns is valid: no device twice (across claims, nor one already
  allocated), counters never exceeded, every device matching its request's class and
  selectors and tolerating its taints, constraints kept;
- when a brute-force search finds any valid allocation, the allocator finds one too
  (first fit with full backtracking is complete);
- the per-node quick check never rejects a node the allocator fills;
- allocating pod after pod with the earlier ones in flight never reuses a device.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.plugins.dynamicresources import (
    AllocatedDevices,
    AllocationError,
    Allocator,
    Demand,
    DeviceCounts,
    DeviceID,
    Inventory,
)

from tests.plugins.dynamicresources.brute import Instance, check, instances, solvable
from tests.plugins.dynamicresources.builders import CEL_ENV, node


def build(inst: Instance) -> tuple[Allocator, DeviceCounts, AllocatedDevices]:
    classes = {c.name: c for c in inst.classes()}
    inventory = Inventory(inst.slices())
    allocated = AllocatedDevices(frozenset(DeviceID(*k.split("/")) for k in inst.allocated))
    return (
        Allocator(classes, inventory, allocated, CEL_ENV),
        DeviceCounts(classes, inventory, CEL_ENV),
        allocated,
    )


@settings(max_examples=400, deadline=None)
@given(instances())
def test_allocations_are_valid_and_found_whenever_one_exists(inst: Instance) -> None:
    alloc, counts, allocated = build(inst)
    claims = inst.claim_objects()
    try:
        results = alloc.allocate(node(), claims)
    except AllocationError:
        # Upstream's one claim error these instances can cause: an All request whose
        # devices break the claim's constraint.
        assert _all_under_constraint(inst)
        return
    if results is not None:
        check(inst, results)
        assert counts.may_fit(node(), Demand.of(claims), allocated)
    assert (results is not None) == solvable(inst)


@settings(max_examples=100, deadline=None)
@given(instances(), st.integers(2, 4))
def test_pods_one_after_another_never_share_a_device(inst: Instance, pods: int) -> None:
    alloc, _, allocated = build(inst)
    held: list[str] = []
    claims = inst.claim_objects()  # each pod asks for the same
    for _ in range(pods):
        try:
            results = Allocator(alloc.classes, alloc.inventory, allocated, CEL_ENV).allocate(
                node(), claims
            )
        except AllocationError:
            assert _all_under_constraint(inst)
            return
        if results is None:
            continue
        for result in results:
            held += [f"{r.driver}/{r.pool}/{r.device}" for r in result.devices.results]
        allocated = allocated.with_results(results)
    assert len(held) == len(set(held))
    assert not set(held) & inst.allocated


def _all_under_constraint(inst: Instance) -> bool:
    return any(
        c.constraint and any(alt[3] for r in c.requests for alt in r.alternatives)
        for c in inst.claims
    )
