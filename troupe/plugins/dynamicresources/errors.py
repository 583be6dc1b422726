"""What the DRA allocator raises, by who has to act.

``allocator.Allocator.allocate`` returns the allocations, or ``None`` when the claims do
not fit the node. Everything else is one of these, following upstream's
``structured.Allocator.Allocate`` contract and how ``dynamicresources.go`` Filter reads it:

- ``AllocationError``: the claims or their classes are wrong (unknown class, too many
  devices, a constraint ``All`` cannot meet, a bad selector). It holds for every node, so
  the caller stops the pod's attempt (upstream: an Error status, the pod backs off).
  ``SelectorCompileError`` and ``SelectorRuntimeError`` say which CEL outcome it was: a
  compile error only goes away when the claim or class changes; a runtime error (a
  missing attribute) is the one upstream documents as "backs off, not unschedulable".
- ``NodeAllocationError``: only this node is affected (upstream
  ``ErrFailedAllocationOnNode``), e.g. ``invalid resource pools were encountered``;
  other nodes may still fit.
- ``AllocationTimeout``: the search ran out of its time or step budget
  (``timed out trying to allocate devices``).
"""

from __future__ import annotations

from typing import Final

TIMED_OUT: Final = "timed out trying to allocate devices"
INVALID_POOLS: Final = "invalid resource pools were encountered"


class AllocationError(Exception):
    """A claim or class problem: no node can fix it."""


class SelectorError(AllocationError):
    """A CEL selector of ``claim`` (``ns/name``) or of class ``device_class`` failed."""

    def __init__(self, message: str, *, claim: str = "", device_class: str = "") -> None:
        super().__init__(message)
        self.claim = claim
        self.device_class = device_class


class SelectorCompileError(SelectorError):
    """The expression does not compile: the claim or class is invalid."""


class SelectorRuntimeError(SelectorError):
    """The expression failed while evaluating on a device (e.g. ``no such key``)."""


class NodeAllocationError(Exception):
    """Allocation failed on this node only; the message says why."""


class AllocationTimeout(Exception):
    """The search exceeded its deadline or step budget."""

    def __init__(self) -> None:
        super().__init__(TIMED_OUT)
