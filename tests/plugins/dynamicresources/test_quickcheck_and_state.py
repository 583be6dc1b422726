"""The per-node quick check (DeviceCounts, Demand), the devices-in-use state built from
claims, and the inventory's per-node cache."""

from __future__ import annotations

from troupe.api.dra.objects import AllocationResult, ResourceClaim
from troupe.plugins.dynamicresources import (
    AllocatedDevices,
    Demand,
    DeviceCounts,
    DeviceID,
    Inventory,
)
from troupe.plugins.dynamicresources.quickcheck import UNBOUNDED

from tests.plugins.dynamicresources.builders import (
    CEL_ENV,
    claim,
    dev,
    device_class,
    devs,
    node,
    slice_,
    sub,
)

RED = device_class("red", 'device.attributes["driver-a"].color == "red"')
CLASSES = {c.name: c for c in (device_class("any"), RED)}
SLICES = [
    slice_(
        "n1",
        dev("a").attr("color", "red"),
        dev("b").attr("color", "blue"),
        dev("c").attr("color", "red"),
    ),
    slice_("n2", *(d.attr("color", "blue") for d in devs("a", "b")), node="node-2", pool="pool-2"),
    slice_("broken", dev("x").attr("color", "red"), pool="pool-3", count=2),  # incomplete
]


def counts() -> DeviceCounts:
    return DeviceCounts(CLASSES, Inventory(SLICES), CEL_ENV)


def test_free_counts_per_node_and_class() -> None:
    dc, none = counts(), AllocatedDevices()
    assert dc.free(node("node-1"), "any", none) == 3  # not the incomplete pool's device
    assert dc.free(node("node-1"), "red", none) == 2
    assert dc.free(node("node-2"), "red", none) == 0
    assert dc.free(node("node-1"), "unknown", none) == 0


def test_a_device_whose_selector_fails_is_counted_for_the_allocator_to_report() -> None:
    dc = DeviceCounts(CLASSES, Inventory([slice_("s", dev("no-color"))]), CEL_ENV)
    assert dc.free(node("node-1"), "red", AllocatedDevices()) == 1


def test_held_devices_are_not_free() -> None:
    held = AllocatedDevices(frozenset({DeviceID("driver-a", "pool-1", "a")}))
    assert counts().free(node("node-1"), "red", held) == 1


def test_a_shareable_device_makes_a_class_unbounded() -> None:
    dc = DeviceCounts(CLASSES, Inventory([slice_("s", dev("a").multi())]), CEL_ENV)
    assert dc.free(node("node-1"), "any", AllocatedDevices()) == UNBOUNDED


def test_demand_counts_exact_requests_per_class() -> None:
    claims = [
        claim("c0").request("r0", "red", 2).request("r1", "any").obj(),
        claim("c1")
        .request("r0", "red")
        .request("r1", "any", admin=True)
        .request("r2", "any", all=True)
        .first_available("r3", sub("s", "red", 5))
        .obj(),
    ]
    assert Demand.of(claims).per_class == {"red": 3, "any": 2}


def test_may_fit_prunes_nodes_short_of_devices() -> None:
    dc, none = counts(), AllocatedDevices()
    two_red = Demand.of([claim("c").request("r", "red", 2).obj()])
    assert dc.may_fit(node("node-1"), two_red, none)
    assert not dc.may_fit(node("node-2"), two_red, none)
    held = AllocatedDevices(frozenset({DeviceID("driver-a", "pool-1", "c")}))
    assert not dc.may_fit(node("node-1"), two_red, held)


def allocated_claim(*results: dict[str, object]) -> ResourceClaim:
    return ResourceClaim.model_validate(
        {
            "metadata": {"name": "c", "namespace": "ns"},
            "status": {"allocation": {"devices": {"results": list(results)}}},
        }
    )


def result(device: str, **more: object) -> dict[str, object]:
    return {"request": "r", "driver": "d", "pool": "p", "device": device, **more}


def test_allocated_state_from_claims() -> None:
    state = AllocatedDevices.of_claims(
        [
            allocated_claim(result("a"), result("b", adminAccess=True)),
            allocated_claim(result("s", shareID="1", consumedCapacity={"memory": "1Gi"})),
            allocated_claim(result("s", shareID="2", consumedCapacity={"memory": "2Gi"})),
            ResourceClaim.model_validate({"metadata": {"name": "unallocated"}}),
        ]
    )
    assert state.dedicated == {DeviceID("d", "p", "a")}  # admin access holds nothing
    assert state.shared == {DeviceID("d", "p", "s"): {"memory": 3 * 2**30 * 10**9}}
    assert state.is_allocated(DeviceID("d", "p", "s"))
    assert not state.is_allocated(DeviceID("d", "p", "b"))


def test_in_flight_results_add_to_the_state() -> None:
    base = AllocatedDevices(frozenset({DeviceID("d", "p", "a")}))
    more = base.with_results(
        [AllocationResult.model_validate({"devices": {"results": [result("b")]}})]
    )
    assert more.dedicated == {DeviceID("d", "p", "a"), DeviceID("d", "p", "b")}
    assert base.dedicated == {DeviceID("d", "p", "a")}  # unchanged


def test_pools_are_cached_per_node_object() -> None:
    inventory = Inventory(SLICES)
    first = node("node-1")
    assert inventory.pools_for(first) is inventory.pools_for(first)
    assert inventory.pools_for(node("node-1")) is not inventory.pools_for(first)
