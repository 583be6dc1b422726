"""Allocator cases: pools and slices, nodes, backtracking, All, already allocated,
admin access, limits (the families of upstream's allocatortesting suite; the cases and
their expectations are troupe's own, derived from upstream's semantics)."""

from __future__ import annotations

import pytest

from tests.plugins.dynamicresources.builders import (
    DRIVER_B,
    claim,
    dev,
    devs,
    label_selector,
    node,
    slice_,
)
from tests.plugins.dynamicresources.cases import Case, ids, run_case

LARGE = 'device.attributes["driver-a"].size == "large"'
ONE = slice_("s1", dev("dev-1"))
TWO = slice_("s1", *devs("dev-1", "dev-2"))
LARGE_FIRST = slice_("s1", dev("large").attr("size", "large"), dev("small").attr("size", "small"))

CASES = [
    Case(
        "a claim for one device gets the node's device",
        [claim("c0").request("r0", "class-a")],
        [ONE],
        [["r0=driver-a/pool-1/dev-1"]],
    ),
    Case("no claims need nothing", [], [ONE], []),
    Case(
        "a device on another node is not offered",
        [claim("c0").request("r0", "class-a")],
        [ONE],
        None,
        node=node("node-2"),
    ),
    Case("no slices: nothing to allocate", [claim("c0").request("r0", "class-a")], [], None),
    Case("not enough suitable devices", [claim("c0").request("r0", "class-a", 3)], [TWO], None),
    Case(
        "a request's selector is applied",
        [claim("c0").request("r0", "class-a", 1, LARGE)],
        [LARGE_FIRST],
        [["r0=driver-a/pool-1/large"]],
    ),
    Case(
        "backtracking over requests: the first request gives up the only large device",
        [claim("c0").request("r0", "class-a").request("r1", "class-a", 1, LARGE)],
        [LARGE_FIRST],
        [["r0=driver-a/pool-1/small", "r1=driver-a/pool-1/large"]],
    ),
    Case(
        "backtracking over claims: the first claim gives up the only large device",
        [claim("c0").request("r0", "class-a"), claim("c1").request("r0", "class-a", 1, LARGE)],
        [LARGE_FIRST],
        [["r0=driver-a/pool-1/small"], ["r0=driver-a/pool-1/large"]],
    ),
    Case(
        "one request takes several devices in slice order",
        [claim("c0").request("r0", "class-a", 2)],
        [TWO],
        [["r0=driver-a/pool-1/dev-1", "r0=driver-a/pool-1/dev-2"]],
    ),
    Case(
        "slices of a pool are tried by name, not by listing order",
        [claim("c0").request("r0", "class-a")],
        [slice_("slice-b", dev("dev-1"), count=2), slice_("slice-a", dev("dev-2"), count=2)],
        [["r0=driver-a/pool-1/dev-2"]],
    ),
    Case(
        "pools are tried by driver then name",
        [claim("c0").request("r0", "class-a")],
        [slice_("s2", dev("dev-2"), pool="pool-2"), slice_("s1", dev("dev-1"), pool="pool-1")],
        [["r0=driver-a/pool-1/dev-1"]],
    ),
    Case(
        "two drivers, one class each",
        [claim("c0").request("r0", "class-b").request("r1", "class-a")],
        [ONE, slice_("s2", dev("dev-1"), driver=DRIVER_B)],
        [["r0=driver-b/pool-1/dev-1", "r1=driver-a/pool-1/dev-1"]],
    ),
    Case(
        "an obsolete generation of a pool is ignored",
        [claim("c0").request("r0", "class-a")],
        [slice_("old", dev("dev-1"), generation=1), slice_("new", dev("dev-2"), generation=2)],
        [["r0=driver-a/pool-1/dev-2"]],
    ),
    Case(
        "a pool whose newer generation targets another node is obsolete here",
        [claim("c0").request("r0", "class-a")],
        [
            slice_("old", dev("dev-1"), generation=1, count=2),
            slice_("new", dev("dev-2"), generation=2, node="node-2"),
        ],
        None,
    ),
    Case(
        "a pool with fewer slices than it announces is not allocated from",
        [claim("c0").request("r0", "class-a")],
        [slice_("s1", dev("dev-1"), count=2)],
        None,
    ),
    Case(
        "a pool whose other slice is on another node is complete",
        [claim("c0").request("r0", "class-a", 1)],
        [slice_("s1", dev("dev-1"), count=2), slice_("s2", dev("dev-2"), count=2, node="node-2")],
        [["r0=driver-a/pool-1/dev-1"]],
    ),
    Case(
        "duplicate device names make a pool invalid, and nothing else fits",
        [claim("c0").request("r0", "class-a")],
        [slice_("s1", dev("dev-1"), count=2), slice_("s2", dev("dev-1"), count=2)],
        node_error="invalid resource pools were encountered",
    ),
    Case(
        "an invalid pool does not matter when another pool fits",
        [claim("c0").request("r0", "class-a")],
        [
            slice_("s1", dev("dev-1"), count=2),
            slice_("s2", dev("dev-1"), count=2),
            slice_("s3", dev("dev-3"), pool="pool-2"),
        ],
        [["r0=driver-a/pool-2/dev-3"]],
    ),
    Case(
        "an unknown class is an error",
        [claim("c0").request("r0", "gpu")],
        [ONE],
        error="claim default/c0, request r0: could not retrieve device class gpu: "
        'deviceclass.resource.k8s.io "gpu" not found',
    ),
    Case(
        "a request without class is an error",
        [claim("c0").raw_request({"name": "r0", "exactly": {"deviceClassName": ""}})],
        [ONE],
        error="claim default/c0, request r0: missing device class name",
    ),
    Case(
        "an unknown allocation mode is an error",
        [
            claim("c0").raw_request(
                {"name": "r0", "exactly": {"deviceClassName": "class-a", "allocationMode": "Some"}}
            )
        ],
        [ONE],
        error="claim default/c0, request r0: unsupported count mode Some",
    ),
    Case(
        "a selector of an unknown kind is an error",
        [
            claim("c0").raw_request(
                {"name": "r0", "exactly": {"deviceClassName": "class-a", "selectors": [{}]}}
            )
        ],
        [ONE],
        error="claim default/c0, request r0, selector #0: CEL expression empty",
    ),
    Case(
        "a constraint of an unknown kind is an error",
        [claim("c0").request("r0", "class-a").match("")],
        [ONE],
        error="claim default/c0, constraint #0: empty constraint",
    ),
    Case(
        "already allocated devices are skipped",
        [claim("c0").request("r0", "class-a")],
        [TWO],
        [["r0=driver-a/pool-1/dev-2"]],
        allocated=("driver-a/pool-1/dev-1",),
    ),
    Case(
        "admin access may use an allocated device",
        [claim("c0").request("r0", "class-a", admin=True)],
        [ONE],
        [["r0=driver-a/pool-1/dev-1"]],
        allocated=("driver-a/pool-1/dev-1",),
    ),
    Case(
        "admin access does not take one device twice in one claim",
        [claim("c0").request("r0", "class-a", admin=True).request("r1", "class-a", admin=True)],
        [ONE],
        None,
    ),
    Case(
        "two claims with admin access share a device",
        [
            claim("c0").request("r0", "class-a", admin=True),
            claim("c1").request("r0", "class-a", admin=True),
        ],
        [ONE],
        [["r0=driver-a/pool-1/dev-1"], ["r0=driver-a/pool-1/dev-1"]],
    ),
    Case(
        "admin access may share a device a claim before it took",
        [claim("c0").request("r0", "class-a"), claim("c1").request("r0", "class-a", admin=True)],
        [ONE],
        [["r0=driver-a/pool-1/dev-1"], ["r0=driver-a/pool-1/dev-1"]],
    ),
    Case(
        "a device taken with admin access is busy for a later claim of the attempt",
        [claim("c0").request("r0", "class-a", admin=True), claim("c1").request("r0", "class-a")],
        [ONE],
        None,
    ),
    Case(
        "a device taken in this attempt is not free for admin access of the same claim",
        [claim("c0").request("r0", "class-a").request("r1", "class-a", admin=True)],
        [ONE],
        None,
    ),
    # All devices
    Case(
        "All takes the one matching device",
        [claim("c0").request("r0", "class-a", all=True)],
        [ONE],
        [["r0=driver-a/pool-1/dev-1"]],
    ),
    Case(
        "All takes every matching device of every pool",
        [claim("c0").request("r0", "class-a", all=True)],
        [ONE, slice_("s2", dev("dev-1"), pool="pool-2")],
        [["r0=driver-a/pool-1/dev-1", "r0=driver-a/pool-2/dev-1"]],
    ),
    Case(
        "All with nothing matching fails",
        [claim("c0").request("r0", "class-a", all=True)],
        [slice_("s1")],
        None,
    ),
    Case(
        "All with one device allocated elsewhere fails",
        [claim("c0").request("r0", "class-a", all=True)],
        [TWO],
        None,
        allocated=("driver-a/pool-1/dev-1",),
    ),
    Case(
        "All with admin access includes allocated devices",
        [claim("c0").request("r0", "class-a", all=True, admin=True)],
        [TWO],
        [["r0=driver-a/pool-1/dev-1", "r0=driver-a/pool-1/dev-2"]],
        allocated=("driver-a/pool-1/dev-1",),
    ),
    Case(
        "All leaves nothing for a later request",
        [claim("c0").request("r0", "class-a", all=True).request("r1", "class-a")],
        [TWO],
        None,
    ),
    Case(
        "an earlier request leaves All short, whatever it picks",
        [claim("c0").request("r0", "class-a"), claim("c1").request("r0", "class-a", all=True)],
        [TWO],
        None,
    ),
    Case(
        "All of one class next to a request of another",
        [claim("c0").request("r0", "class-a", all=True).request("r1", "class-b")],
        [TWO, slice_("s2", dev("dev-9"), driver=DRIVER_B)],
        [["r0=driver-a/pool-1/dev-1", "r0=driver-a/pool-1/dev-2", "r1=driver-b/pool-1/dev-9"]],
    ),
    Case(
        "All refuses an incomplete pool",
        [claim("c0").request("r0", "class-a", all=True)],
        [slice_("s1", dev("dev-1"), count=2)],
        error="claim default/c0, request r0: asks for all devices, but resource pool "
        "driver-a/pool-1 is currently being updated",
    ),
    Case(
        "All refuses an invalid pool",
        [claim("c0").request("r0", "class-a", all=True)],
        [slice_("s1", dev("dev-1"), count=2), slice_("s2", dev("dev-1"), count=2)],
        error="resource pool driver-a/pool-1 is currently invalid",
    ),
    # network-attached devices
    Case(
        "a slice for nodes with a label serves a node with it",
        [claim("c0").request("r0", "class-a")],
        [slice_("net", dev("dev-1"), selector=label_selector("region", "r1"))],
        [["r0=driver-a/pool-1/dev-1"]],
        node=node("node-1", region="r1"),
    ),
    Case(
        "a slice for nodes with a label does not serve a node without it",
        [claim("c0").request("r0", "class-a")],
        [slice_("net", dev("dev-1"), selector=label_selector("region", "r1"))],
        None,
        node=node("node-1", region="r2"),
    ),
    Case(
        "an all-nodes slice serves any node",
        [claim("c0").request("r0", "class-a")],
        [slice_("net", dev("dev-1"), all_nodes=True)],
        [["r0=driver-a/pool-1/dev-1"]],
        node=node("node-7"),
    ),
    Case(
        "node-local and network-attached devices together",
        [claim("c0").request("r0", "class-a", 2)],
        [ONE, slice_("net", dev("dev-1"), pool="net", all_nodes=True)],
        [["r0=driver-a/net/dev-1", "r0=driver-a/pool-1/dev-1"]],
    ),
    Case(
        "per-device node selection offers only this node's devices",
        [claim("c0").request("r0", "class-a")],
        [slice_("s1", dev("dev-1").on("node-2"), dev("dev-2").on("node-1"), per_device=True)],
        [["r0=driver-a/pool-1/dev-2"]],
    ),
    Case(
        "per-device node selection by label and for all nodes",
        [claim("c0").request("r0", "class-a", 2)],
        [
            slice_(
                "s1",
                dev("dev-1").on(selector=label_selector("rack", "a")),
                dev("dev-2").on(selector=label_selector("rack", "b")),
                dev("dev-3").on(all_nodes=True),
                per_device=True,
            )
        ],
        [["r0=driver-a/pool-1/dev-2", "r0=driver-a/pool-1/dev-3"]],
        node=node("node-1", rack="b"),
    ),
    # limits
    Case(
        "a request for more than 32 devices is an error",
        [claim("c0").request("r0", "class-a", 33)],
        [ONE],
        error="claim default/c0: number of requested devices 33 exceeds the claim limit of 32",
    ),
    Case(
        "requests adding up to more than 32 devices are an error",
        [claim("c0").request("r0", "class-a", 32).request("r1", "class-a")],
        [ONE],
        error="number of requested devices 33 exceeds the claim limit of 32",
    ),
    Case(
        "32 devices are allowed",
        [claim("c0").request("r0", "class-a", 32)],
        [slice_("s1", *devs(*(f"d{i:02}" for i in range(32))))],
        [[f"r0=driver-a/pool-1/d{i:02}" for i in range(32)]],
    ),
    Case(
        "All beyond 32 devices does not fit",
        [claim("c0").request("r0", "class-a", all=True)],
        [slice_("s1", *devs(*(f"d{i:02}" for i in range(33))))],
        None,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_allocator(case: Case) -> None:
    run_case(case)
