"""The fix search of ``troupe explain``: changes that would make the target bind, each
checked first by running the scheduler on a modified copy of the state
(``Trial.first_that_binds``).

Three kinds, in this order: the nodes to buy that buy least (``addNodes``: clones of
one node shape into the domain they make hold the gang, ``troupe.whatif.buy``), a
lower minCount for a gang with some members fitting (``lowerMinCount``), and running
pods moved out of one node or topology domain (``freeCapacity``,
``troupe.whatif.free``). Each kind offers its candidates lazily,
best first; the first that binds is the fix shown. Called by ``troupe.cli.explain``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from troupe.whatif import free
from troupe.whatif.attempt import Fix, Trial
from troupe.whatif.buy import purchases
from troupe.whatif.diagnosis import Diagnosis
from troupe.whatif.fit import Ask
from troupe.whatif.state import ClusterState, Target

Candidates = Iterator[tuple[ClusterState, Fix]]
PURCHASES: Final = 3  # node purchases checked at most, best first


async def find_fixes(
    trial: Trial, state: ClusterState, diagnosis: Diagnosis, ask: Ask
) -> list[Fix]:
    """Every kind's first candidate that binds the target."""
    found: list[Fix] = []
    for candidates in (
        add_nodes(state, trial.target, ask),
        lower_min_count(state, trial, diagnosis),
        free.candidates(state, trial.target, diagnosis, ask),
    ):
        found += await trial.first_that_binds(candidates)
    return found


def add_nodes(state: ClusterState, target: Target, ask: Ask) -> Candidates:
    """Nodes to buy (``troupe.whatif.buy``): the ``PURCHASES`` that buy least, best
    first, then one more node of the best, in case a filter the arithmetic does not
    count wants more room."""
    found = purchases(state, target, ask)
    tried = found[:PURCHASES]
    if tried:
        tried.append(tried[0].with_count(tried[0].count + 1))
    for purchase in tried:
        copy, names = state.with_clones(purchase.like, purchase.count, purchase.labels)
        fix: Fix = {
            "fix": purchase.text(),
            "kind": "addNodes",
            "like": purchase.like,
            "count": purchase.count,
            "newNodes": names,
            "bought": purchase.bought,
        }
        if purchase.level:
            fix["domain"] = f"{purchase.level}={purchase.domain}"
        if purchase.labels:
            fix["labels"] = purchase.labels
        yield copy, fix


def lower_min_count(state: ClusterState, trial: Trial, diagnosis: Diagnosis) -> Candidates:
    """A gang's minCount lowered to the members that fit now."""
    quorum = diagnosis.quorum
    if quorum is None or not 0 < quorum.fit < quorum.min_count:
        return
    copy = state.with_min_count(trial.target, quorum.fit)
    if copy is not None:
        yield (
            copy,
            {
                "fix": f"lower minCount to {quorum.fit} ({quorum.min_count_field})",
                "kind": "lowerMinCount",
                "minCount": quorum.fit,
            },
        )
