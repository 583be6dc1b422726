"""The case table shape shared by the allocator test files: a sentence, the objects,
and what upstream's allocator semantics say comes out."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from troupe.api.dra.objects import DeviceClass, ResourceSlice
from troupe.api.objects import Node
from troupe.plugins.dynamicresources import (
    AllocationError,
    NodeAllocationError,
)

from tests.plugins.dynamicresources.builders import allocator, claim, device_class, node, picks

CLASS_A = device_class("class-a")
CLASS_B = device_class("class-b", driver="driver-b")


@dataclass(frozen=True)
class Case:
    what: str
    claims: list[claim]
    slices: list[ResourceSlice]
    expect: list[list[str]] | None = None  # per claim, "request=driver/pool/device"
    classes: list[DeviceClass] = field(default_factory=lambda: [CLASS_A, CLASS_B])
    allocated: tuple[str, ...] = ()
    shared: dict[str, dict[str, str]] | None = None
    node: Node = field(default_factory=node)
    error: str | None = None  # an AllocationError containing this
    node_error: str | None = None  # a NodeAllocationError containing this


def run_case(case: Case) -> None:
    alloc = allocator(case.classes, case.slices, allocated=case.allocated, shared=case.shared)
    claims = [c.obj() for c in case.claims]
    if case.error is not None:
        with pytest.raises(AllocationError) as caught:
            alloc.allocate(case.node, claims)
        assert case.error in str(caught.value)
        return
    if case.node_error is not None:
        with pytest.raises(NodeAllocationError) as caught_node:
            alloc.allocate(case.node, claims)
        assert case.node_error in str(caught_node.value)
        return
    assert picks(alloc.allocate(case.node, claims)) == case.expect


def ids(cases: list[Case]) -> list[str]:
    return [c.what for c in cases]
