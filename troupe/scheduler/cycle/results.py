"""The outcomes of a scheduling cycle, shared by the pod and pod-group cycles."""

from __future__ import annotations

from dataclasses import dataclass

from troupe.api.framework import Diagnosis
from troupe.api.status import Status


# Not frozen: a frozen dataclass's __init__ sets each field through
# object.__setattr__, three times the cost, and one is made for every pod placed.
@dataclass(slots=True)
class ScheduleResult:
    node: str
    evaluated_nodes: int
    feasible_nodes: int


@dataclass(frozen=True, slots=True)
class CycleFailure:
    status: Status
    diagnosis: Diagnosis | None = None
    # PostFilter's nomination to write with the failure: a node (preemption), ""
    # to clear an earlier one, None to leave ``status.nominatedNodeName`` alone.
    nominated_node_name: str | None = None
