"""The fix search of ``troupe explain``: changes that would make the target bind, each
checked first by running the scheduler on a modified copy of the state
(``Trial.first_that_binds``).

Three kinds, in this order: more nodes like the best one (``addNodes``: N from the
members missing, then N+1), a lower minCount for a gang with some members fitting
(``lowerMinCount``), and running pods moved out of one node or topology domain
(``freeCapacity``, ``troupe.whatif.free``). Each kind offers its candidates lazily,
best first; the first that binds is the fix shown. Called by ``troupe.cli.explain``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from troupe.api.objects import Node
from troupe.api.resources import node_allocatable
from troupe.whatif import free
from troupe.whatif.attempt import Fix, Trial
from troupe.whatif.diagnosis import Diagnosis
from troupe.whatif.fit import Ask, fits, node_filter_note
from troupe.whatif.state import ClusterState

Candidates = Iterator[tuple[ClusterState, Fix]]


async def find_fixes(
    trial: Trial, state: ClusterState, diagnosis: Diagnosis, ask: Ask
) -> list[Fix]:
    """Every kind's first candidate that binds the target."""
    found: list[Fix] = []
    for candidates in (
        add_nodes(state, diagnosis, ask),
        lower_min_count(state, trial, diagnosis),
        free.candidates(state, trial.target, diagnosis, ask),
    ):
        found += await trial.first_that_binds(candidates)
    return found


def _room_for(obj: dict[str, object], ask: Ask) -> int:
    return fits(node_allocatable(Node.model_validate(obj)), ask.request)


def best_node(state: ClusterState, diagnosis: Diagnosis, ask: Ask) -> str:
    """The node to clone: one a member fits on in this attempt when there is one (it
    passes every filter), else, of the nodes the member's filters allow, the one with
    the most room for a member when empty."""
    fits_on = [m.fits_on for m in diagnosis.members if m.fits_on]
    names = {n["metadata"]["name"]: n for n in state.nodes}
    if fits_on and fits_on[0] in names:
        return fits_on[0]
    best, room = "", -1
    for name, obj in sorted(names.items()):
        if node_filter_note(obj, ask.pod):
            continue
        r = _room_for(obj, ask)
        if r > room:
            best, room = name, r
    return best


def add_nodes(state: ClusterState, diagnosis: Diagnosis, ask: Ask) -> Candidates:
    """N more nodes like the best one (N for the members missing), then N+1."""
    quorum = diagnosis.quorum
    missing = max(1, quorum.min_count - quorum.fit) if quorum else 1
    like = best_node(state, diagnosis, ask)
    if not like:
        return
    model = next(n for n in state.nodes if n["metadata"]["name"] == like)
    count = math.ceil(missing / max(1, _room_for(model, ask)))
    for n in (count, count + 1):
        copy, names = state.with_clones(like, n)
        yield (
            copy,
            {
                "fix": f"add {n} more node{'s' if n > 1 else ''} like {like}",
                "kind": "addNodes",
                "like": like,
                "count": n,
                "newNodes": names,
            },
        )


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
