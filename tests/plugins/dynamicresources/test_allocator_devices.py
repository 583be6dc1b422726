"""Allocator cases: partitionable devices (shared counters), device taints, consumable
capacity, CEL errors, and the search budget."""

from __future__ import annotations

import itertools

import pytest
from troupe.plugins.dynamicresources import (
    AllocationTimeout,
    SelectorCompileError,
    SelectorRuntimeError,
)

from tests.plugins.dynamicresources.builders import (
    allocator,
    claim,
    dev,
    device_class,
    devs,
    node,
    slice_,
    sub,
)
from tests.plugins.dynamicresources.cases import CLASS_A, Case, ids, run_case

GPU_COUNTERS = {"gpu": {"memory": "8Gi"}}
PARTS = [
    slice_(
        "s1",
        dev("whole").consumes("gpu", memory="8Gi"),
        dev("part-1").consumes("gpu", memory="4Gi"),
        dev("part-2").consumes("gpu", memory="4Gi"),
        count=2,
    ),
    slice_("s2", counters=GPU_COUNTERS, count=2),
]

PARTITIONABLE = [
    Case(
        "the first device that fits the counters",
        [claim("c0").request("r0", "class-a")],
        PARTS,
        [["r0=driver-a/pool-1/whole"]],
    ),
    Case(
        "two partitions when the whole device would leave nothing",
        [claim("c0").request("r0", "class-a", 2)],
        PARTS,
        [["r0=driver-a/pool-1/part-1", "r0=driver-a/pool-1/part-2"]],
    ),
    Case(
        "counters are shared across the claims of one attempt",
        [claim("c0").request("r0", "class-a"), claim("c1").request("r0", "class-a")],
        PARTS,
        [["r0=driver-a/pool-1/part-1"], ["r0=driver-a/pool-1/part-2"]],
    ),
    Case(
        "an allocated device holds its counters",
        [claim("c0").request("r0", "class-a")],
        PARTS,
        None,
        allocated=("driver-a/pool-1/whole",),
    ),
    Case(
        "an allocated partition leaves room for the other",
        [claim("c0").request("r0", "class-a")],
        PARTS,
        [["r0=driver-a/pool-1/part-2"]],
        allocated=("driver-a/pool-1/part-1",),
    ),
    Case(
        "every counter of the set must stay covered",
        [claim("c0").request("r0", "class-a", 2)],
        [
            slice_(
                "s1",
                dev("a").consumes("g", memory="2", cores="3"),
                dev("b").consumes("g", memory="2", cores="2"),
                dev("c").consumes("g", memory="2", cores="1"),
                count=2,
            ),
            slice_("s2", counters={"g": {"memory": "8", "cores": "4"}}, count=2),
        ],
        [["r0=driver-a/pool-1/a", "r0=driver-a/pool-1/c"]],
    ),
    Case(
        "a device on another node that holds the shared counters blocks this one",
        [claim("c0").request("r0", "class-a")],
        [
            slice_(
                "s1",
                dev("d1").on("node-1").consumes("g", memory="8"),
                dev("d2").on("node-2").consumes("g", memory="8"),
                per_device=True,
                count=2,
            ),
            slice_("s2", counters={"g": {"memory": "8"}}, count=2, all_nodes=True),
        ],
        None,
        allocated=("driver-a/pool-1/d2",),
    ),
    Case(
        "consuming an unknown counter set makes the pool invalid",
        [claim("c0").request("r0", "class-a")],
        [
            slice_("s1", dev("d1").consumes("nope", memory="1"), count=2),
            slice_("s2", counters={"g": {"memory": "8"}}, count=2),
        ],
        node_error="invalid resource pools were encountered",
    ),
    Case(
        "consuming an unknown counter makes the pool invalid",
        [claim("c0").request("r0", "class-a")],
        [
            slice_("s1", dev("d1").consumes("g", hbm="1"), count=2),
            slice_("s2", counters={"g": {"memory": "8"}}, count=2),
        ],
        node_error="invalid resource pools were encountered",
    ),
    Case(
        "a counter set defined twice makes the pool invalid",
        [claim("c0").request("r0", "class-a")],
        [
            slice_("s1", dev("d1"), count=3),
            slice_("s2", counters={"g": {"m": "1"}}, count=3),
            slice_("s3", counters={"g": {"m": "1"}}, count=3),
        ],
        node_error="invalid resource pools were encountered",
    ),
]

TOLERATE_K = {"key": "k", "operator": "Exists"}
TAINTED = slice_("s1", dev("dev-1").taint("k", "NoSchedule"), dev("dev-2"))

TAINTS = [
    Case(
        "a NoSchedule taint keeps a device out",
        [claim("c0").request("r0", "class-a")],
        [TAINTED],
        [["r0=driver-a/pool-1/dev-2"]],
    ),
    Case(
        "so does NoExecute",
        [claim("c0").request("r0", "class-a")],
        [slice_("s1", dev("dev-1").taint("k", "NoExecute"))],
        None,
    ),
    Case(
        "a taint with another effect does not",
        [claim("c0").request("r0", "class-a")],
        [slice_("s1", dev("dev-1").taint("k", "None"))],
        [["r0=driver-a/pool-1/dev-1"]],
    ),
    Case(
        "an Exists toleration lets the tainted device in",
        [claim("c0").request("r0", "class-a", tolerations=[TOLERATE_K])],
        [TAINTED],
        [["r0=driver-a/pool-1/dev-1"]],
    ),
    Case(
        "an Equal toleration needs the same value",
        [
            claim("c0").request(
                "r0",
                "class-a",
                tolerations=[
                    {"key": "k", "operator": "Equal", "value": "x", "effect": "NoSchedule"}
                ],
            )
        ],
        [slice_("s1", dev("dev-1").taint("k", "NoSchedule", "y"), dev("dev-2"))],
        [["r0=driver-a/pool-1/dev-2"]],
    ),
    Case(
        "every blocking taint must be tolerated",
        [claim("c0").request("r0", "class-a", tolerations=[TOLERATE_K])],
        [slice_("s1", dev("dev-1").taint("k", "NoSchedule").taint("j", "NoExecute"))],
        None,
    ),
    Case(
        "admin access does not ignore taints",
        [claim("c0").request("r0", "class-a", admin=True)],
        [slice_("s1", dev("dev-1").taint("k", "NoSchedule"))],
        None,
    ),
    Case(
        "All fails on a tainted device",
        [claim("c0").request("r0", "class-a", all=True)],
        [TAINTED],
        None,
    ),
    Case(
        "a subrequest brings its own tolerations",
        [
            claim("c0").first_available(
                "r0", sub("s0", "class-a"), sub("s1", "class-a", tolerations=[TOLERATE_K])
            )
        ],
        [slice_("s1", dev("dev-1").taint("k", "NoSchedule"))],
        [["r0/s1=driver-a/pool-1/dev-1"]],
    ),
]

SHARED = [slice_("s1", dev("dev-1").multi().cap("memory", "8Gi"))]
RANGE = {"default": "2Gi", "validRange": {"min": "2Gi", "step": "2Gi", "max": "4Gi"}}


def want(size: str) -> claim:
    return claim(f"c-{size}").request("r0", "class-a", capacity={"memory": size})


CAPACITY = [
    Case(
        "two claims share a device",
        [want("4Gi"), want("4Gi")],
        SHARED,
        [["r0=driver-a/pool-1/dev-1"], ["r0=driver-a/pool-1/dev-1"]],
    ),
    Case("a third share would exceed the capacity", [want("4Gi")] * 3, SHARED, None),
    Case(
        "allocated shares count",
        [want("4Gi")],
        SHARED,
        None,
        shared={"driver-a/pool-1/dev-1": {"memory": "6Gi"}},
    ),
    Case(
        "what allocated shares leave is usable",
        [want("2Gi")],
        SHARED,
        [["r0=driver-a/pool-1/dev-1"]],
        shared={"driver-a/pool-1/dev-1": {"memory": "6Gi"}},
    ),
    Case(
        "a capacity the device does not have",
        [claim("c0").request("r0", "class-a", capacity={"hbm": "1"})],
        SHARED,
        None,
    ),
    Case(
        "without a request a share takes the whole capacity",
        [claim("c0").request("r0", "class-a"), want("1Gi")],
        SHARED,
        None,
    ),
    Case(
        "without a request a share takes the policy's default",
        [claim("c0").request("r0", "class-a"), claim("c1").request("r0", "class-a")],
        [slice_("s1", dev("dev-1").multi().cap("memory", "4Gi", **RANGE))],
        [["r0=driver-a/pool-1/dev-1"], ["r0=driver-a/pool-1/dev-1"]],
    ),
    Case(
        "a range policy rounds requests up to its step: 2Gi + 4Gi + 2Gi fill 8Gi",
        [want("1Gi"), want("3Gi"), want("1Gi")],
        [slice_("s1", dev("dev-1").multi().cap("memory", "8Gi", **RANGE))],
        [["r0=driver-a/pool-1/dev-1"]] * 3,
    ),
    Case(
        "a range policy rounds requests up to its step: no room for another 1Gi",
        [want("1Gi"), want("3Gi"), want("1Gi"), want("1Gi")],
        [slice_("s1", dev("dev-1").multi().cap("memory", "8Gi", **RANGE))],
        None,
    ),
    Case(
        "a request above the policy's maximum does not fit",
        [want("5Gi")],
        [slice_("s1", dev("dev-1").multi().cap("memory", "8Gi", **RANGE))],
        None,
    ),
    Case(
        "valid values round a request up",
        [want("2Gi"), want("2Gi"), want("1Gi")],
        [slice_("s1", dev("dev-1").multi().cap("memory", "9Gi", validValues=["1Gi", "4Gi"]))],
        [["r0=driver-a/pool-1/dev-1"]] * 3,
    ),
    Case(
        "a dedicated device checks the request against its capacity",
        [want("8Gi")],
        [slice_("s1", dev("dev-1").cap("memory", "4Gi"))],
        None,
    ),
    Case(
        "a dedicated device within its capacity",
        [want("2Gi"), want("2Gi")],
        [slice_("s1", *(d.cap("memory", "4Gi") for d in devs("dev-1", "dev-2")))],
        [["r0=driver-a/pool-1/dev-1"], ["r0=driver-a/pool-1/dev-2"]],
    ),
    Case(
        "a shareable device allocated as dedicated is busy",
        [want("1Gi")],
        SHARED,
        None,
        allocated=("driver-a/pool-1/dev-1",),
    ),
    Case(
        "a shared device takes its counters once",
        [want("4Gi"), want("4Gi")],
        [
            slice_("s1", dev("dev-1").multi().cap("memory", "8Gi").consumes("g", m="8"), count=2),
            slice_("s2", counters={"g": {"m": "8"}}, count=2),
        ],
        [["r0=driver-a/pool-1/dev-1"], ["r0=driver-a/pool-1/dev-1"]],
    ),
    Case(
        "backtracking gives back the capacity a share took",
        [
            claim("c0")
            .request("r0", "class-a", capacity={"memory": "4Gi"})
            .request("r1", "class-a", capacity={"memory": "4Gi"})
            .match("driver-a/model")
        ],
        [
            slice_(
                "s1",
                dev("small").multi().cap("memory", "4Gi").attr("model", "b"),
                dev("big").multi().cap("memory", "8Gi").attr("model", "a"),
            )
        ],
        [["r0=driver-a/pool-1/big", "r1=driver-a/pool-1/big"]],
    ),
]

NEEDS_MODEL = 'device.attributes["driver-a"].model == "x"'

CEL = [
    Case(
        "an expression that does not compile is an error of the claim",
        [claim("c0").request("r0", "class-a", 1, "noSuchVar")],
        [slice_("s1", dev("dev-1"))],
        error="claim default/c0: selector #0: CEL compile error: compilation failed:",
    ),
    Case(
        "an expression that does not compile is an error of the class",
        [claim("c0").request("r0", "bad")],
        [slice_("s1", dev("dev-1"))],
        classes=[device_class("bad", "noSuchVar")],
        error="class bad: selector #1: CEL compile error: compilation failed:",
    ),
    Case(
        "a missing attribute is a runtime error naming the device",
        [claim("c0").request("r0", "class-a", 1, NEEDS_MODEL)],
        [slice_("s1", dev("dev-1"))],
        error="claim default/c0: selector #0 on device driver-a/pool-1/dev-1: CEL runtime"
        " error: no such key: model",
    ),
    Case(
        "a device in use is skipped before its selectors run",
        [claim("c0").request("r0", "class-a", 1, NEEDS_MODEL)],
        [slice_("s1", dev("dev-1"), dev("dev-2").attr("model", "x"))],
        [["r0=driver-a/pool-1/dev-2"]],
        allocated=("driver-a/pool-1/dev-1",),
    ),
    Case(
        "All evaluates its selectors before searching",
        [claim("c0").request("r0", "class-a", 1, "noSuchVar", all=True)],
        [slice_("s1", dev("dev-1"))],
        error="CEL compile error",
    ),
]


@pytest.mark.parametrize("case", PARTITIONABLE, ids=ids(PARTITIONABLE))
def test_partitionable_devices(case: Case) -> None:
    run_case(case)


@pytest.mark.parametrize("case", TAINTS, ids=ids(TAINTS))
def test_taints(case: Case) -> None:
    run_case(case)


@pytest.mark.parametrize("case", CAPACITY, ids=ids(CAPACITY))
def test_consumable_capacity(case: Case) -> None:
    run_case(case)


@pytest.mark.parametrize("case", CEL, ids=ids(CEL))
def test_cel_selectors(case: Case) -> None:
    run_case(case)


def test_cel_errors_say_which_kind_and_whose() -> None:
    alloc = allocator([CLASS_A], [slice_("s1", dev("dev-1"))])
    with pytest.raises(SelectorRuntimeError) as runtime:
        alloc.allocate(node(), [claim("c0").request("r0", "class-a", 1, NEEDS_MODEL).obj()])
    assert (runtime.value.claim, runtime.value.device_class) == ("default/c0", "")
    bad = device_class("bad", "noSuchVar")
    with pytest.raises(SelectorCompileError) as compile_error:
        allocator([bad], [slice_("s1", dev("dev-1"))]).allocate(
            node(), [claim("c0").request("r0", "bad").obj()]
        )
    assert (compile_error.value.claim, compile_error.value.device_class) == ("", "bad")


# Twelve devices, five values, six distinct wanted: no solution, found only after
# trying every combination.
HARD = [slice_("s1", *(dev(f"d{i:02}").attr("v", i % 5) for i in range(12)))]
HARD_CLAIM = claim("c0").request("r0", "class-a", 6).distinct("driver-a/v")


def test_the_search_without_budget_runs_to_the_end() -> None:
    alloc = allocator([CLASS_A], HARD)
    assert alloc.allocate(node(), [HARD_CLAIM.obj()]) is None
    assert alloc.last_steps > 400  # four times the budget of the next test


def test_a_step_budget_stops_the_search() -> None:
    alloc = allocator([CLASS_A], HARD, max_steps=100)
    with pytest.raises(AllocationTimeout, match="timed out trying to allocate devices"):
        alloc.allocate(node(), [HARD_CLAIM.obj()])


def test_a_deadline_stops_the_search() -> None:
    ticks = itertools.count()
    alloc = allocator([CLASS_A], HARD)
    alloc.clock = lambda: float(next(ticks))  # one second per look at the clock
    with pytest.raises(AllocationTimeout):
        alloc.allocate(node(), [HARD_CLAIM.obj()], deadline=3.0)
    assert next(ticks) < 10  # stopped at the first looks past the deadline
