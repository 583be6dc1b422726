"""PodGroupPodsCount: favour placements that fit more of the group's pods (KEP-5732).

Upstream's score is the group's scheduled pods (bound or assumed before, plus those
the placement would take) and its normalization divides by the highest count among
the candidates, so a placement taking every member scores 100.
"""

from __future__ import annotations

from troupe.api.framework import MAX_NODE_SCORE, MIN_NODE_SCORE, Handle, PlacementAssignment
from troupe.api.nodetable import NodeTable
from troupe.api.status import Code, Status


class PodGroupPodsCount:
    name = "PodGroupPodsCount"

    def __init__(self, args: None, handle: Handle) -> None:
        del args, handle

    def score_placement(self, table: NodeTable, assignment: PlacementAssignment) -> int:
        del table
        return assignment.scheduled

    def normalize_placement_score(self, scores: list[int]) -> Status:
        top = max(scores, default=0)
        if top == 0:
            return Status.with_code(
                Code.ERROR,
                "no pods from pod group are assigned to any of the candidate placements",
            )
        for i, score in enumerate(scores):
            scores[i] = MIN_NODE_SCORE + score * (MAX_NODE_SCORE - MIN_NODE_SCORE) // top
        return Status()


__all__ = ["PodGroupPodsCount"]
