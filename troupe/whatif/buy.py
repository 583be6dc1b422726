"""Which nodes to buy so a gang fits: the ``addNodes`` fix of ``troupe explain``, and the
note that no domain of the gang's required level can hold it as it is.

A purchase is a number of clones of one node shape (allocatable, taints and labels;
``ClusterState.with_clones``) added to one domain of the required topology level (or
to the cluster, without one). For every shape the member's filters allow and every
domain the gang may go to, the count is what the domain lacks: the members still
needed less those that fit there now (by requests, on the nodes the member's filters
allow: ``troupe.whatif.fit``), divided by how many fit on an empty node of the shape.
Purchases are ranked by what is bought — fewest nodes, then least capacity (counted in
members' worth of each requested resource, so a smaller node of the same count wins),
then a clone of a node already in the domain before one relabelled into it — and the
fixes search checks them best first with the scheduler (``troupe.whatif.fixes``), so a
purchase that the arithmetic favours but another filter refuses is passed over.

Members already bound pin a topology gang to their domain (upstream's
TopologyPlacement), so only that domain is considered then. ``domain_limit`` says when
no domain of the level can hold the members even empty (``no rack holds 64
nvidia.com/gpu: the largest has 32``): freeing capacity cannot help there, only
buying nodes into a domain or relaxing the constraint.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from troupe.api.objects import Node
from troupe.api.resources import node_allocatable
from troupe.whatif.fit import (
    Ask,
    NodeRoom,
    fits,
    fmt_vector,
    natural_key,
    node_filter_note,
    node_free,
)
from troupe.whatif.state import ClusterState, Target
from troupe.whatif.units import amount_text, number_text

Obj = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True)
class Purchase:
    like: str  # the node cloned
    count: int
    level: str = ""  # the required topology level ("" none)
    domain: str = ""  # its value the clones carry ("" none)
    relabel: bool = False  # ``like`` is in another domain: the clones get ``domain``
    bought: dict[str, int] = field(default_factory=dict)  # count x allocatable
    cost: tuple[Any, ...] = ()

    @property
    def labels(self) -> dict[str, str]:
        """The labels the clones get other than ``like``'s."""
        return {self.level: self.domain} if self.relabel else {}

    def text(self) -> str:
        plural = "s" if self.count > 1 else ""
        text = f"add {self.count} more node{plural} like {self.like}"
        if self.relabel:
            return f"{text}, labelled {self.level}={self.domain}"
        return f"{text} in {noun(self.level)} {self.domain}" if self.level else text

    def with_count(self, count: int) -> Purchase:
        scale = {r: v // max(1, self.count) * count for r, v in self.bought.items()}
        return Purchase(self.like, count, self.level, self.domain, self.relabel, scale, ())


def noun(level: str) -> str:
    """How text names a domain of ``level``: ``example.com/rack`` -> ``rack``."""
    return level.rsplit("/", 1)[-1] or level


def domains_of(rooms: dict[str, NodeRoom], level: str) -> dict[str, list[str]]:
    """Domain value -> its nodes (one domain "" holding every node without a level;
    nodes without the label are in no domain)."""
    if not level:
        return {"": sorted(rooms, key=natural_key)}
    out: dict[str, list[str]] = {}
    for name, room in sorted(rooms.items(), key=lambda item: natural_key(item[0])):
        value = (room.node["metadata"].get("labels") or {}).get(level)
        if value is not None:
            out.setdefault(value, []).append(name)
    return out


def _shape(obj: Obj, level: str) -> tuple[Any, ...]:
    """What makes two nodes the same to buy: allocatable, taints, and labels other than
    the hostname and the level."""
    node = Node.model_validate(obj)
    labels = {
        k: v for k, v in (obj["metadata"].get("labels") or {}).items() if k not in (HOSTNAME, level)
    }
    taints = sorted((t.key, t.value or "", t.effect) for t in node.spec.taints)
    return (
        tuple(sorted(node_allocatable(node).items())),
        tuple(taints),
        tuple(sorted(labels.items())),
        bool(node.spec.unschedulable),
    )


def _relabelled(obj: Obj, level: str, value: str) -> Obj:
    clone = copy.deepcopy(obj)
    clone["metadata"].setdefault("labels", {})[level] = value
    return clone


def pinned_domain(state: ClusterState, target: Target, level: str) -> str | None:
    """The domain the target's bound members are in (None: none bound, or no level)."""
    if not level:
        return None
    labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in state.nodes}
    for pod in state.bound_members(target):
        value = labels.get(pod["spec"]["nodeName"], {}).get(level)
        if value is not None:
            return str(value)
    return None


def purchases(state: ClusterState, target: Target, ask: Ask) -> list[Purchase]:
    """Every (shape, domain) purchase that makes room for the members still needed, by
    requests, best first (see the module doc)."""
    if not ask.request:
        return []
    rooms = node_free(state, ask.pod)
    domains = domains_of(rooms, ask.level)
    pinned = pinned_domain(state, target, ask.level)
    if pinned is not None:
        domains = {pinned: domains.get(pinned, [])}
    shapes: dict[tuple[Any, ...], list[str]] = {}
    for name, room in sorted(rooms.items(), key=lambda item: natural_key(item[0])):
        shapes.setdefault(_shape(room.node, ask.level), []).append(name)
    found: list[Purchase] = []
    for value, names in domains.items():
        fit_now = sum(fits(rooms[n].free, ask.request) for n in names if not rooms[n].note)
        lacking = max(1, ask.needed - fit_now)
        for members in shapes.values():
            purchase = _purchase(rooms, ask, value, names, members, lacking)
            if purchase is not None:
                found.append(purchase)
    return sorted(found, key=lambda p: p.cost)


def _purchase(
    rooms: dict[str, NodeRoom],
    ask: Ask,
    value: str,
    names: list[str],
    members: list[str],
    lacking: int,
) -> Purchase | None:
    inside = [n for n in members if n in names]
    like = (inside or members)[0]
    model = rooms[like].node
    relabel = bool(ask.level) and not inside
    if relabel:
        model = _relabelled(model, ask.level, value)
    if node_filter_note(model, ask.pod):
        return None
    alloc = node_allocatable(Node.model_validate(model))
    per_node = fits(alloc, ask.request)
    if per_node == 0:
        return None
    count = math.ceil(lacking / per_node)
    bought = {r: alloc.get(r, 0) * count for r in ask.request}
    worth = sum(Fraction(bought[r], v) for r, v in ask.request.items() if v > 0)
    return Purchase(
        like,
        count,
        ask.level,
        value,
        relabel,
        bought,
        (count, worth, relabel, natural_key(value), natural_key(like)),
    )


def domain_limit(state: ClusterState, target: Target, ask: Ask) -> str:
    """Why no domain of the required level can hold the members still needed even with
    nothing else running on it, or "" when one can (or there is no level)."""
    if not ask.level or not ask.request:
        return ""
    rooms = node_free(state, ask.pod)
    domains = domains_of(rooms, ask.level)
    pinned = pinned_domain(state, target, ask.level)
    if pinned is not None:
        domains = {pinned: domains.get(pinned, [])}
    what = noun(ask.level)
    if not domains:
        return f"no node has the label {ask.level}: no {what} can hold the gang"
    allocs = {
        name: node_allocatable(Node.model_validate(rooms[name].node))
        for names in domains.values()
        for name in names
        if not rooms[name].note
    }
    slots = {
        v: sum(fits(allocs[n], ask.request) for n in ns if n in allocs) for v, ns in domains.items()
    }
    if max(slots.values()) >= ask.needed:
        return ""
    totals = {
        v: {r: sum(allocs[n].get(r, 0) for n in ns if n in allocs) for r in ask.request}
        for v, ns in domains.items()
    }
    scarce = [
        (Fraction(max(t[r] for t in totals.values()), ask.needed * v), r)
        for r, v in ask.request.items()
        if v > 0 and max(t[r] for t in totals.values()) < ask.needed * v
    ]
    which = "the only one" if len(domains) == 1 else "the largest"
    if scarce:
        _, r = min(scarce)
        largest = max(t[r] for t in totals.values())
        return (
            f"no {what} holds {amount_text(r, ask.needed * ask.request[r])}: "
            f"{which} has {number_text(r, largest)}"
        )
    return (
        f"no {what} holds {ask.needed} members of {fmt_vector(ask.request)} even empty: "
        f"{which} holds {max(slots.values())}"
    )
