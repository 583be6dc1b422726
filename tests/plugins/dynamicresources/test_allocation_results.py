"""What an allocation result holds besides its devices: node selector, configs copied
from class and claim, admin access, tolerations, shares, binding conditions."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.dra.objects import AllocationResult
from troupe.plugins.dynamicresources import AllocationError

from tests.plugins.dynamicresources.builders import (
    DRIVER_B,
    SHARE_ID,
    allocator,
    claim,
    dev,
    device_class,
    label_selector,
    node,
    slice_,
    sub,
)
from tests.plugins.dynamicresources.cases import CLASS_A, CLASS_B


def only(
    c: claim, *slices: Any, classes: Any = (CLASS_A, CLASS_B), at: Any = None
) -> AllocationResult:
    results = allocator(list(classes), list(slices)).allocate(at or node(), [c.obj()])
    assert results is not None and len(results) == 1
    return results[0]


def selector_of(result: AllocationResult) -> Any:
    return (
        None
        if result.node_selector is None
        else result.node_selector.model_dump(exclude_defaults=True)
    )


LOCAL = {
    "nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
    ]
}


def test_a_node_local_device_pins_the_claim_to_the_node() -> None:
    result = only(claim("c0").request("r0", "class-a"), slice_("s1", dev("d")))
    assert selector_of(result) == LOCAL
    assert result.allocation_timestamp is None  # the caller's to set


def test_devices_of_labelled_slices_combine_their_selectors() -> None:
    result = only(
        claim("c0").request("r0", "class-a").request("r1", "class-a"),
        slice_("a", dev("d"), pool="a", selector=label_selector("region", "r1")),
        slice_("b", dev("d"), pool="b", selector=label_selector("zone", "z1")),
        at=node("node-1", region="r1", zone="z1"),
    )
    assert selector_of(result) == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "region", "operator": "In", "values": ["r1"]},
                    {"key": "zone", "operator": "In", "values": ["z1"]},
                ]
            }
        ]
    }


def test_the_same_requirement_is_listed_once() -> None:
    result = only(
        claim("c0").request("r0", "class-a", 2),
        slice_("a", dev("d1"), dev("d2"), selector=label_selector("region", "r1")),
        at=node("node-1", region="r1"),
    )
    assert len(result.node_selector.node_selector_terms[0].match_expressions) == 1  # type: ignore[union-attr]


def test_devices_reachable_from_every_node_need_no_selector() -> None:
    result = only(claim("c0").request("r0", "class-a"), slice_("s1", dev("d"), all_nodes=True))
    assert result.node_selector is None


def test_a_local_device_wins_over_network_attached_ones() -> None:
    result = only(
        claim("c0").request("r0", "class-a", 2),
        slice_("a", dev("d"), pool="a", selector=label_selector("region", "r1")),
        slice_("b", dev("d"), pool="b"),
        at=node("node-1", region="r1"),
    )
    assert selector_of(result) == LOCAL


def test_a_per_device_node_name_is_local() -> None:
    result = only(
        claim("c0").request("r0", "class-a"), slice_("s1", dev("d").on("node-1"), per_device=True)
    )
    assert selector_of(result) == LOCAL


def test_a_slice_selector_with_two_terms_is_an_error() -> None:
    two_terms = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "b", "operator": "Exists"}]},
        ]
    }
    with pytest.raises(AllocationError, match=r"unsupported ResourceSlice\.NodeSelector with 2"):
        only(
            claim("c0").request("r0", "class-a"),
            slice_("s1", dev("d"), selector=two_terms),
            at=node("node-1", a="1"),
        )


def configs(result: AllocationResult) -> list[tuple[str, list[str], Any]]:
    return [
        (c.source, c.requests, c.opaque.parameters if c.opaque else None)
        for c in result.devices.config
    ]


def test_class_config_then_claim_config() -> None:
    class_a = device_class("class-a", config={"from": "class-a"})
    class_b = device_class("class-b", driver=DRIVER_B, config={"from": "class-b"})
    result = only(
        claim("c0")
        .request("r0", "class-a")
        .request("r1", "class-a")
        .request("r2", "class-b")
        .config({"from": "claim"}, "r0", "r1")
        .config({"from": "claim, all"}),
        slice_("s1", dev("d1"), dev("d2")),
        slice_("s2", dev("d"), driver=DRIVER_B),
        classes=(class_a, class_b),
    )
    assert configs(result) == [
        ("FromClass", ["r0", "r1"], {"from": "class-a"}),
        ("FromClass", ["r2"], {"from": "class-b"}),
        ("FromClaim", ["r0", "r1"], {"from": "claim"}),
        ("FromClaim", [], {"from": "claim, all"}),
    ]


def test_a_config_covering_every_request_lists_none() -> None:
    result = only(
        claim("c0").request("r0", "class-a").config({"x": 1}, "r0"),
        slice_("s1", dev("d1")),
        classes=(device_class("class-a", config={"y": 2}),),
    )
    assert configs(result) == [("FromClass", [], {"y": 2}), ("FromClaim", [], {"x": 1})]


def test_configs_follow_the_chosen_subrequest() -> None:
    result = only(
        claim("c0")
        .first_available("r0", sub("s0", "class-b"), sub("s1", "class-a"))
        .request("r1", "class-a")
        .config({"for": "s0"}, "r0/s0")
        .config({"for": "s1"}, "r0/s1")
        .config({"for": "r0"}, "r0"),
        slice_("s1", dev("d1"), dev("d2")),
        classes=(device_class("class-a", config={"c": "a"}), CLASS_B),
    )
    assert [r.request for r in result.devices.results] == ["r0/s1", "r1"]
    assert configs(result) == [
        ("FromClass", [], {"c": "a"}),  # r0/s1 and r1: every request
        ("FromClaim", ["r0/s1"], {"for": "s1"}),
        ("FromClaim", ["r0"], {"for": "r0"}),
    ]


def test_admin_access_and_tolerations_are_recorded() -> None:
    toleration = {"key": "k", "operator": "Exists"}
    result = only(
        claim("c0").request("r0", "class-a", admin=True, tolerations=[toleration]),
        slice_("s1", dev("d").taint("k", "NoSchedule")),
    )
    device = result.devices.results[0]
    assert device.admin_access is True
    assert [(t.key, t.operator) for t in device.tolerations] == [("k", "Exists")]
    plain = only(claim("c0").request("r0", "class-a"), slice_("s1", dev("d")))
    assert plain.devices.results[0].admin_access is None


def test_a_share_records_its_id_and_what_it_consumes() -> None:
    policy = {"default": "2Gi", "validRange": {"min": "2Gi", "step": "2Gi", "max": "6Gi"}}
    result = only(
        claim("c0").request("r0", "class-a", capacity={"memory": "3Gi"}),
        slice_("s1", dev("d").multi().cap("memory", "8Gi", **policy).cap("cores", "4")),
    )
    device = result.devices.results[0]
    assert device.share_id == SHARE_ID
    assert device.consumed_capacity == {"memory": "4Gi", "cores": "4"}


def test_a_dedicated_device_has_no_share() -> None:
    result = only(
        claim("c0").request("r0", "class-a", capacity={"memory": "1Gi"}),
        slice_("s1", dev("d").cap("memory", "8Gi")),
    )
    device = result.devices.results[0]
    assert (device.share_id, device.consumed_capacity) == (None, {})


def test_binding_conditions_are_copied_and_their_pools_come_last() -> None:
    result = only(
        claim("c0").request("r0", "class-a"),
        slice_("a", dev("d").binding("attached"), pool="a"),
        slice_("b", dev("d"), pool="b"),
    )
    assert result.devices.results[0].pool == "b"
    result = only(
        claim("c0").request("r0", "class-a"),
        slice_("a", dev("d").binding("attached"), all_nodes=True),
    )
    assert result.devices.results[0].binding_conditions == ["attached"]
    assert selector_of(result) == LOCAL  # bindsToNode pins it
