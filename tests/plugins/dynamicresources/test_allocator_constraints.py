"""Allocator cases: matchAttribute / distinctAttribute constraints and prioritized lists
(firstAvailable, KEP-4816)."""

from __future__ import annotations

import pytest

from tests.plugins.dynamicresources.builders import claim, dev, devs, slice_, sub
from tests.plugins.dynamicresources.cases import Case, ids, run_case

MODELS = slice_(
    "s1",
    dev("dev-1").attr("model", "a"),
    dev("dev-2").attr("model", "b"),
    dev("dev-3").attr("model", "a"),
)
NUMA = slice_(
    "s1", dev("dev-1").attr("numa", 0), dev("dev-2").attr("numa", 0), dev("dev-3").attr("numa", 1)
)
LARGE = 'device.attributes["driver-a"].size == "large"'
LARGE_FIRST = slice_("s1", dev("large").attr("size", "large"), dev("small").attr("size", "small"))

CONSTRAINTS = [
    Case(
        "matchAttribute on a string skips the device that differs",
        [claim("c0").request("r0", "class-a", 2).match("driver-a/model")],
        [MODELS],
        [["r0=driver-a/pool-1/dev-1", "r0=driver-a/pool-1/dev-3"]],
    ),
    Case(
        "matchAttribute on an int",
        [claim("c0").request("r0", "class-a").request("r1", "class-a").match("driver-a/numa")],
        [
            slice_(
                "s1",
                dev("dev-1").attr("numa", 1),
                dev("dev-2").attr("numa", 0),
                dev("dev-3").attr("numa", 1),
            )
        ],
        [["r0=driver-a/pool-1/dev-1", "r1=driver-a/pool-1/dev-3"]],
    ),
    Case(
        "matchAttribute on a bool and on a version",
        [claim("c0").request("r0", "class-a", 2).match("driver-a/ok").match("driver-a/fw")],
        [
            slice_(
                "s1",
                dev("dev-1").attr("ok", True).version("fw", "1.0.0"),
                dev("dev-2").attr("ok", True).version("fw", "2.0.0"),
                dev("dev-3").attr("ok", False).version("fw", "1.0.0"),
                dev("dev-4").attr("ok", True).version("fw", "1.0.0"),
            )
        ],
        [["r0=driver-a/pool-1/dev-1", "r0=driver-a/pool-1/dev-4"]],
    ),
    Case(
        "an attribute of another domain is looked up by its full name",
        [claim("c0").request("r0", "class-a", 2).match("numa.example.com/node")],
        [
            slice_(
                "s1",
                dev("dev-1").attr("numa.example.com/node", 1),
                dev("dev-2").attr("node", 1),
                dev("dev-3").attr("numa.example.com/node", 1),
            )
        ],
        [["r0=driver-a/pool-1/dev-1", "r0=driver-a/pool-1/dev-3"]],
    ),
    Case(
        "a device without the attribute never satisfies a constraint",
        [claim("c0").request("r0", "class-a").match("driver-a/missing")],
        [MODELS],
        None,
    ),
    Case(
        "values of different kinds do not match",
        [claim("c0").request("r0", "class-a", 2).match("driver-a/v")],
        [slice_("s1", dev("dev-1").attr("v", "1"), dev("dev-2").attr("v", 1))],
        None,
    ),
    Case(
        "a constraint applies only to the requests it names",
        [
            claim("c0")
            .request("r0", "class-a")
            .request("r1", "class-a")
            .request("r2", "class-a")
            .match("driver-a/model", "r0", "r2")
        ],
        [MODELS],
        [["r0=driver-a/pool-1/dev-1", "r1=driver-a/pool-1/dev-2", "r2=driver-a/pool-1/dev-3"]],
    ),
    Case(
        "a constraint that fails late makes the search backtrack",
        [
            claim("c0")
            .request("r0", "class-a")
            .request("r1", "class-a", 1, 'device.attributes["driver-a"].model == "b"')
            .match("driver-a/model")
        ],
        [
            slice_(
                "s1",
                dev("dev-1").attr("model", "a"),
                dev("dev-2").attr("model", "b"),
                dev("dev-3").attr("model", "b"),
            )
        ],
        [["r0=driver-a/pool-1/dev-2", "r1=driver-a/pool-1/dev-3"]],
    ),
    Case(
        "constraints are per claim",
        [
            claim("c0").request("r0", "class-a").match("driver-a/model"),
            claim("c1").request("r0", "class-a").match("driver-a/model"),
        ],
        [MODELS],
        [["r0=driver-a/pool-1/dev-1"], ["r0=driver-a/pool-1/dev-2"]],
    ),
    Case(
        "distinctAttribute picks devices with different values",
        [claim("c0").request("r0", "class-a", 2).distinct("driver-a/numa")],
        [NUMA],
        [["r0=driver-a/pool-1/dev-1", "r0=driver-a/pool-1/dev-3"]],
    ),
    Case(
        "distinctAttribute holds across every device of one request (upstream lets the "
        "third device repeat the first's value)",
        [claim("c0").request("r0", "class-a", 3).distinct("driver-a/model")],
        [
            slice_(
                "s1",
                dev("dev-1").attr("model", "a"),
                dev("dev-2").attr("model", "b"),
                dev("dev-3").attr("model", "a"),
                dev("dev-4").attr("model", "c"),
            )
        ],
        [["r0=driver-a/pool-1/dev-1", "r0=driver-a/pool-1/dev-2", "r0=driver-a/pool-1/dev-4"]],
    ),
    Case(
        "distinctAttribute with too few values fails",
        [claim("c0").request("r0", "class-a", 3).distinct("driver-a/numa")],
        [NUMA],
        None,
    ),
    Case(
        "All must keep the constraint with every device, or the claim is in error",
        [claim("c0").request("r0", "class-a", all=True).match("driver-a/model")],
        [MODELS],
        error="claim default/c0, request r0: cannot add device driver-a/pool-1/dev-2 because a"
        " claim constraint would not be satisfied",
    ),
    Case(
        "All that keeps the constraint",
        [claim("c0").request("r0", "class-a", all=True).match("driver-a/model")],
        [slice_("s1", dev("dev-1").attr("model", "a"), dev("dev-2").attr("model", "a"))],
        [["r0=driver-a/pool-1/dev-1", "r0=driver-a/pool-1/dev-2"]],
    ),
]

PRIORITIZED = [
    Case(
        "the first subrequest that can be satisfied wins",
        [claim("c0").first_available("r0", sub("s0", "class-b"), sub("s1", "class-a"))],
        [slice_("s1", dev("dev-1"))],
        [["r0/s1=driver-a/pool-1/dev-1"]],
    ),
    Case(
        "the first subrequest is preferred when it fits",
        [claim("c0").first_available("r0", sub("s0", "class-a", 2), sub("s1", "class-a"))],
        [slice_("s1", *devs("dev-1", "dev-2"))],
        [["r0/s0=driver-a/pool-1/dev-1", "r0/s0=driver-a/pool-1/dev-2"]],
    ),
    Case(
        "no subrequest fits",
        [claim("c0").first_available("r0", sub("s0", "class-b"), sub("s1", "class-a", 3))],
        [slice_("s1", *devs("dev-1", "dev-2"))],
        None,
    ),
    Case(
        "subrequest selectors",
        [claim("c0").first_available("r0", sub("s0", "class-a", 1, LARGE), sub("s1", "class-a"))],
        [slice_("s1", dev("small").attr("size", "small"))],
        [["r0/s1=driver-a/pool-1/small"]],
    ),
    Case(
        "a later request makes the search fall back to the second subrequest",
        [
            claim("c0")
            .first_available("r0", sub("s0", "class-a", 1, LARGE), sub("s1", "class-a"))
            .request("r1", "class-a", 1, LARGE)
        ],
        [LARGE_FIRST],
        [["r0/s1=driver-a/pool-1/small", "r1=driver-a/pool-1/large"]],
    ),
    Case(
        "a constraint naming the parent request covers its subrequests",
        [
            claim("c0")
            .first_available("r0", sub("s0", "class-a"))
            .request("r1", "class-a")
            .match("driver-a/model", "r0", "r1")
        ],
        [MODELS],
        [["r0/s0=driver-a/pool-1/dev-1", "r1=driver-a/pool-1/dev-3"]],
    ),
    Case(
        "a constraint naming one subrequest applies to it only",
        [
            claim("c0")
            .first_available("r0", sub("s0", "class-a", 2), sub("s1", "class-a", 2))
            .match("driver-a/model", "r0/s1")
        ],
        [MODELS],
        [["r0/s0=driver-a/pool-1/dev-1", "r0/s0=driver-a/pool-1/dev-2"]],
    ),
    Case(
        "a subrequest for All devices",
        [
            claim("c0").first_available(
                "r0", sub("s0", "class-b"), sub("s1", "class-a", allocationMode="All")
            )
        ],
        [slice_("s1", *devs("dev-1", "dev-2"))],
        [["r0/s1=driver-a/pool-1/dev-1", "r0/s1=driver-a/pool-1/dev-2"]],
    ),
    Case(
        "a subrequest that would exceed 32 devices gives way to a smaller one",
        [
            claim("c0")
            .request("r0", "class-a", 31)
            .first_available("r1", sub("s0", "class-a", 2), sub("s1", "class-a", 1))
        ],
        [slice_("s1", *devs(*(f"d{i:02}" for i in range(34))))],
        [[*(f"r0=driver-a/pool-1/d{i:02}" for i in range(31)), "r1/s1=driver-a/pool-1/d31"]],
    ),
    Case(
        "every subrequest of a prioritized list must name a known class",
        [claim("c0").first_available("r0", sub("s0", "class-a"), sub("s1", "nope"))],
        [slice_("s1", dev("dev-1"))],
        error="claim default/c0, request s1: could not retrieve",
    ),
    Case(
        "a request with neither exactly nor firstAvailable is an error",
        [claim("c0").raw_request({"name": "r0"})],
        [slice_("s1", dev("dev-1"))],
        error="claim default/c0, request r0: neither exactly nor firstAvailable is set",
    ),
]


@pytest.mark.parametrize("case", CONSTRAINTS, ids=ids(CONSTRAINTS))
def test_constraints(case: Case) -> None:
    run_case(case)


@pytest.mark.parametrize("case", PRIORITIZED, ids=ids(PRIORITIZED))
def test_prioritized_lists(case: Case) -> None:
    run_case(case)
