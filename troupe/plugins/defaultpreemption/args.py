"""DefaultPreemptionArgs: how many candidate nodes preemption dry-runs before choosing.

Fields, defaults and checks follow upstream ``DefaultPreemptionArgs`` and
``ValidateDefaultPreemptionArgs``: preemption evaluates nodes until it has
``max(numNodes * minCandidateNodesPercentage / 100, minCandidateNodesAbsolute)``
candidates (never more than the nodes that can take part), and both may not be zero.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel


class DefaultPreemptionArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100

    @model_validator(mode="after")
    def _check(self) -> DefaultPreemptionArgs:
        problems: list[str] = []
        pct, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        if not 0 <= pct <= 100:
            problems.append(
                f"minCandidateNodesPercentage: Invalid value: {pct}: not in valid range [0, 100]"
            )
        if absolute < 0:
            problems.append(
                f"minCandidateNodesAbsolute: Invalid value: {absolute}: not in valid range [0, inf)"
            )
        if pct == 0 and absolute == 0:
            problems.append(
                "minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same "
                "time as minCandidateNodesAbsolute"
            )
            problems.append(
                "minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same "
                "time as minCandidateNodesPercentage"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def num_candidates(self, num_nodes: int) -> int:
        """How many candidates to find among ``num_nodes`` potential nodes (upstream
        ``calculateNumCandidates``)."""
        n = num_nodes * self.min_candidate_nodes_percentage // 100
        return min(max(n, self.min_candidate_nodes_absolute), num_nodes)
