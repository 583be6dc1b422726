"""The free-capacity fix of ``troupe explain``: which running pods to move so the target
binds, e.g. ``free 8 nvidia.com/gpu in rack zone-a-r0 (move 4 pods: ...)``.

The search works on requests, as the capacity section does. Per candidate domain (each
domain of the gang's required topology level, or the whole cluster without one) it
frees room for one more member at a time on the node that needs the fewest pods moved
for it, until the members still needed fit. Only nodes the member's own filters allow
are used (``node_filter_note``); the target's own pods, DaemonSet and mirror pods are
never moved; pods of lower priority than the target are preferred (on each node the
set is first looked for among them only, exhaustively up to EXHAUSTIVE pods among the
POOL that free the most, then greedily). PodDisruptionBudgets are respected as
preemption respects them, softly: pods a budget allows no disruption of
(``disruptionsAllowed`` 0) are only taken when no other set frees the room, and a plan
that moves more of a budget's pods than it allows says so. Domains are ranked by how
many moved pods would go past a budget, then by how many do not have lower priority,
then by how many pods move, then by how many nodes.

``candidates`` gives ``troupe.whatif.fixes`` the best plans with the state each is
checked on: like the other fixes, a plan is shown only if the scheduler, run on a copy
of the state without those pods, binds the target; at most ``CANDIDATES`` plans are
tried.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from troupe.api.objects import Pod
from troupe.api.pdb import PodDisruptionBudget
from troupe.api.resources import pod_requests
from troupe.whatif.diagnosis import Diagnosis
from troupe.whatif.fit import Ask, NodeRoom, fits, fmt_vector, node_free
from troupe.whatif.state import ClusterState, Target, bound, pod_key

Obj = dict[str, Any]
CANDIDATES = 2  # plans verified at most (each is one run of the scheduler)
EXHAUSTIVE = 3  # per node, sets up to this size are searched exhaustively
POOL = 12  # among the pods that free the most there
SHOWN = 6  # pods named in the fix's text (all of them in -o json)


@dataclass(frozen=True)
class Movable:
    key: str
    node: str
    priority: int
    requests: dict[str, int]
    lower: bool  # of lower priority than the target
    # "namespace/name" of the PodDisruptionBudgets that select it.
    budgets: tuple[str, ...] = ()
    # One of them allows no disruption now.
    protected: bool = False


@dataclass
class Plan:
    level: str
    value: str  # the domain's label value ("" without a level)
    pods: list[Movable] = field(default_factory=list)
    # Budget -> disruptions it allows now (only budgets of the moved pods).
    allowed: dict[str, int] = field(default_factory=dict)

    def over_budget(self) -> dict[str, int]:
        """Budget -> how many more of its pods the plan moves than it allows."""
        moved: dict[str, int] = {}
        for m in self.pods:
            for b in m.budgets:
                moved[b] = moved.get(b, 0) + 1
        return {
            b: n - self.allowed.get(b, 0)
            for b, n in sorted(moved.items())
            if n > self.allowed.get(b, 0)
        }

    @property
    def nodes(self) -> list[str]:
        return sorted({m.node for m in self.pods})

    def rank(self) -> tuple[int, int, int, int, str]:
        return (
            sum(self.over_budget().values()),
            sum(not m.lower for m in self.pods),
            len(self.pods),
            len(self.nodes),
            self.value,
        )


def _movable(obj: Obj) -> bool:
    meta = obj["metadata"]
    if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
        return False
    owners = meta.get("ownerReferences") or []
    return not any(o.get("kind") == "DaemonSet" for o in owners)


def target_priority(state: ClusterState, target: Target) -> int:
    """The priority of the target's pending pods (the highest, for a gang)."""
    values = [int((p.get("spec") or {}).get("priority") or 0) for p in state.members(target)]
    return max(values, default=0)


def budgets(state: ClusterState) -> list[PodDisruptionBudget]:
    out: list[PodDisruptionBudget] = []
    for obj in state.of("poddisruptionbudgets"):
        try:
            out.append(PodDisruptionBudget.model_validate(obj))
        except ValueError:
            continue  # a budget that does not parse protects nothing, as in preemption
    return out


def running(
    state: ClusterState,
    target: Target,
    priority: int,
    pdbs: list[PodDisruptionBudget] | None = None,
) -> dict[str, list[Movable]]:
    """Node -> the pods bound there that may be moved for the target."""
    own = {pod_key(p) for p in state.bound_members(target)}
    pdbs = budgets(state) if pdbs is None else pdbs
    out: dict[str, list[Movable]] = {}
    for obj in state.pods:
        if not bound(obj) or pod_key(obj) in own or not _movable(obj):
            continue
        node = obj["spec"]["nodeName"]
        prio = int(obj["spec"].get("priority") or 0)
        parsed = Pod.model_validate(obj)
        covering = [b for b in pdbs if b.covers(parsed)]
        out.setdefault(node, []).append(
            Movable(
                pod_key(obj),
                node,
                prio,
                dict(pod_requests(parsed, cap=True)),  # bound: counted as the cache does
                prio < priority,
                tuple(f"{b.metadata.namespace}/{b.metadata.name}" for b in covering),
                any(b.status.disruptions_allowed <= 0 for b in covering),
            )
        )
    return out


def _covers(chosen: tuple[Movable, ...], deficit: dict[str, int]) -> bool:
    return all(sum(m.requests.get(r, 0) for m in chosen) >= v for r, v in deficit.items())


def _cover(deficit: dict[str, int], pool: list[Movable]) -> list[Movable] | None:
    """The fewest pods of ``pool`` whose requests cover ``deficit`` (then the least
    freed beyond it): exhaustively up to EXHAUSTIVE pods, greedily beyond."""

    def gain(m: Movable) -> float:
        return sum(min(m.requests.get(r, 0), v) / v for r, v in deficit.items())

    def waste(chosen: tuple[Movable, ...]) -> tuple[int, list[str]]:
        extra = sum(sum(m.requests.get(r, 0) for m in chosen) - v for r, v in deficit.items())
        return extra, [m.key for m in chosen]

    useful = sorted(
        (m for m in pool if any(m.requests.get(r, 0) for r in deficit)),
        key=lambda m: (-gain(m), m.key),
    )
    # The exhaustive search looks at the pods that free the most only.
    best = useful[:POOL]
    for size in range(1, min(EXHAUSTIVE, len(best)) + 1):
        found = [c for c in itertools.combinations(best, size) if _covers(c, deficit)]
        if found:
            found.sort(key=waste)
            return list(found[0])

    chosen: list[Movable] = []
    for m in useful:
        chosen.append(m)
        if _covers(tuple(chosen), deficit):
            return chosen
    return None


def _one_more(
    room: dict[str, int], request: dict[str, int], pods: list[Movable]
) -> list[Movable] | None:
    """The pods to move from one node so one more member fits on it (None: none do)."""
    want = fits(room, request) + 1
    deficit = {r: v * want - room.get(r, 0) for r, v in request.items() if v > 0}
    deficit = {r: v for r, v in deficit.items() if v > 0}
    free = [m for m in pods if not m.protected]
    pools = ([m for m in free if m.lower], free, [m for m in pods if m.lower], pods)
    for pool in pools:
        found = _cover(deficit, pool)
        if found is not None:
            return found
    return None


def _plan(
    level: str,
    value: str,
    nodes: list[str],
    free: dict[str, dict[str, int]],
    movable: dict[str, list[Movable]],
    request: dict[str, int],
    count: int,
) -> Plan | None:
    """Room for ``count`` members on ``nodes``, freeing one member's room at a time."""
    room = {n: dict(free[n]) for n in nodes}
    plan = Plan(level, value)
    # Node -> the pods to move there for one more member (recomputed when it changes).
    options: dict[str, list[Movable] | None] = {}
    while sum(fits(room[n], request) for n in nodes) < count:
        best: tuple[tuple[int, int, int, bool, str], str, list[Movable]] | None = None
        for n in nodes:
            if n not in options:
                left = [m for m in movable.get(n, []) if m not in plan.pods]
                options[n] = _one_more(room[n], request, left)
            found = options[n]
            if found is None:
                continue
            score = (
                sum(m.protected for m in found),
                sum(not m.lower for m in found),
                len(found),
                n not in plan.nodes,
                n,
            )
            if best is None or score < best[0]:
                best = (score, n, found)
        if best is None:
            return None
        _, n, found = best
        for m in found:
            for r, v in m.requests.items():
                room[n][r] = room[n].get(r, 0) + v
        plan.pods.extend(found)
        del options[n]
    return plan if plan.pods else None


def _domains(
    state: ClusterState, target: Target, rooms: dict[str, NodeRoom], level: str
) -> dict[str, list[str]]:
    """Domain (label value of ``level``; "" without one) -> the nodes the member's
    filters allow there. Members already bound hold the gang to their domain."""
    domains: dict[str, list[str]] = {}
    for name in sorted(n for n, room in rooms.items() if not room.note):
        labels = rooms[name].node["metadata"].get("labels") or {}
        if not level:
            domains.setdefault("", []).append(name)
        elif level in labels:
            domains.setdefault(labels[level], []).append(name)
    if level:
        placed = {p["spec"]["nodeName"] for p in state.bound_members(target)}
        held = {
            (rooms[n].node["metadata"].get("labels") or {}).get(level) for n in placed if n in rooms
        }
        if held:
            domains = {v: ns for v, ns in domains.items() if v in held}
    return domains


def search(state: ClusterState, target: Target, ask: Ask) -> list[Plan]:
    """Plans that free room for the members still needed, best first."""
    if not ask.request:
        return []
    rooms = node_free(state, ask.pod)
    allowed = {n: room.free for n, room in rooms.items() if not room.note}
    pdbs = budgets(state)
    movable = running(state, target, target_priority(state, target), pdbs)
    disruptions = {
        f"{b.metadata.namespace}/{b.metadata.name}": b.status.disruptions_allowed for b in pdbs
    }
    plans = [
        p
        for value, names in _domains(state, target, rooms, ask.level).items()
        if (p := _plan(ask.level, value, names, allowed, movable, ask.request, ask.needed))
    ]
    for p in plans:
        p.allowed = {b: disruptions[b] for m in p.pods for b in m.budgets}
    return sorted(plans, key=Plan.rank)


def budget_note(plan: Plan) -> str:
    """What the plan does to PodDisruptionBudgets ("" when it keeps within them)."""
    over = plan.over_budget()
    if not over:
        return ""
    named = ", ".join(
        f"{b} (allows {plan.allowed.get(b, 0)}, {n} more moved)" for b, n in over.items()
    )
    return f"moving them goes past PodDisruptionBudget {named}"


def _freed(plan: Plan, request: dict[str, int]) -> dict[str, int]:
    return {r: sum(m.requests.get(r, 0) for m in plan.pods) for r in request}


def _preemption_said(diagnosis: Diagnosis) -> str:
    """The result of the diagnosis' preemption: "none" when it evicted nothing and
    gave no reason."""
    if diagnosis.preemption is not None:
        return diagnosis.preemption.result
    post = diagnosis.members[0].post_filter if diagnosis.members else ""
    if "preemptionPolicy=Never" in post:
        return "never"
    if diagnosis.nominated_node:
        return "preempted"
    return "none"


def priority_note(plan: Plan, priority: int, diagnosis: Diagnosis) -> str:
    """Whether preemption could have made this room, and why it did not."""
    higher = [m for m in plan.pods if not m.lower]
    if higher:
        return (
            f"{len(higher)} of the moved pods have priority >= the target's ({priority}); "
            "preemption only evicts lower-priority pods, so it could not do this"
        )
    note = f"all of lower priority than the target ({priority}): preemption could do this"
    result = _preemption_said(diagnosis)
    why = {
        "never": "it is off for the target (preemptionPolicy: Never)",
        "rejected": "a PermitDisruption plugin refused its plan",
        "waiting": "it already evicted pods for the target and waits for them to go",
        "preempted": "it is already evicting pods for the target",
        "error": "it failed with an error",
    }.get(
        result,
        "its own search found no victims that make the target fit (it evicts only what "
        "the scheduler's preemption plugins choose; this plan was checked by removing "
        "the pods)",
    )
    return f"{note}; it did not: {why}"


def describe(plan: Plan, request: dict[str, int]) -> str:
    if plan.level:
        short = plan.level.rsplit("/", 1)[-1]
        where = f"in {short} {plan.value}"
    else:
        where = "on " + ", ".join(plan.nodes)
    names = [m.key for m in plan.pods]
    n = len(names)
    shown = ", ".join(names[:SHOWN]) + (f", +{n - SHOWN} more" if n > SHOWN else "")
    freed = fmt_vector(_freed(plan, request))
    return f"free {freed} {where} (move {n} pod{'s' * (n > 1)}: {shown})"


def candidates(
    state: ClusterState, target: Target, diagnosis: Diagnosis, ask: Ask
) -> Iterator[tuple[ClusterState, dict[str, Any]]]:
    """The best ``CANDIDATES`` plans as fixes to check, each with the state it is
    checked on (without the pods it moves)."""
    priority = target_priority(state, target)
    for plan in search(state, target, ask)[:CANDIDATES]:
        notes = (priority_note(plan, priority, diagnosis), budget_note(plan))
        yield (
            state.without_pods({m.key for m in plan.pods}),
            {
                "fix": describe(plan, ask.request),
                "kind": "freeCapacity",
                "level": plan.level,
                "domain": f"{plan.level}={plan.value}" if plan.level else "",
                "nodes": plan.nodes,
                "freed": _freed(plan, ask.request),
                "pods": [m.key for m in plan.pods],
                "lowerPriority": all(m.lower for m in plan.pods),
                "note": "; ".join(n for n in notes if n),
                "overBudget": plan.over_budget(),
            },
        )
