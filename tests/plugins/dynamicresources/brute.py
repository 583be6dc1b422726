"""Tiny random DRA instances, an independent checker of allocations, and a brute-force
search, for the allocator's property tests.

Selectors are kept as pairs of (CEL text for the allocator, Python predicate for the
checker), so the checker does not share the CEL runtime, the pools code or the search
with the allocator it checks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from hypothesis import strategies as st
from troupe.api.dra.objects import AllocationResult, DeviceClass, ResourceClaim, ResourceSlice

from tests.plugins.dynamicresources.builders import claim, dev, device_class, slice_

Predicate = Callable[[dict[str, Any]], bool]

# name -> (CEL, predicate over a device's attributes)
CLASSES: dict[str, tuple[str, Predicate]] = {
    "any": ("true", lambda a: True),
    "red": ('device.attributes["driver-a"].color == "red"', lambda a: a["color"] == "red"),
}
SELECTORS: dict[str, tuple[str, Predicate]] = {
    "numa0": ('device.attributes["driver-a"].numa == 0', lambda a: a["numa"] == 0),
    "numa1": ('device.attributes["driver-a"].numa == 1', lambda a: a["numa"] == 1),
}
TOLERATE = {"key": "bad", "operator": "Exists"}


@dataclass(frozen=True)
class Dev:
    pool: str
    name: str
    color: str
    numa: int
    tainted: bool
    uses: int  # of the pool's counter "m"; 0 = consumes no counter

    @property
    def key(self) -> str:
        return f"driver-a/{self.pool}/{self.name}"

    @property
    def attrs(self) -> dict[str, Any]:
        return {"color": self.color, "numa": self.numa}


@dataclass(frozen=True)
class Req:
    name: str
    alternatives: tuple[tuple[str, int, str | None, bool, bool], ...]  # class, count, sel, all, tol

    @property
    def prioritized(self) -> bool:
        return len(self.alternatives) > 1


@dataclass(frozen=True)
class Cl:
    name: str
    requests: tuple[Req, ...]
    constraint: tuple[str, str] | None  # ("match" | "distinct", attribute)


@dataclass(frozen=True)
class Instance:
    devices: tuple[Dev, ...]
    counters: dict[str, int]  # pool -> available "m"
    claims: tuple[Cl, ...]
    allocated: frozenset[str] = field(default_factory=frozenset)

    def slices(self) -> list[ResourceSlice]:
        out = []
        for pool in sorted({d.pool for d in self.devices} | set(self.counters)):
            built = []
            for d in (d for d in self.devices if d.pool == pool):
                b = dev(d.name).attr("color", d.color).attr("numa", d.numa)
                if d.tainted:
                    b.taint("bad", "NoSchedule")
                if d.uses:
                    b.consumes("g", m=str(d.uses))
                built.append(b)
            has_counters = pool in self.counters
            out.append(slice_(f"{pool}-devices", *built, pool=pool, count=2 if has_counters else 1))
            if has_counters:
                out.append(
                    slice_(
                        f"{pool}-counters",
                        pool=pool,
                        count=2,
                        counters={"g": {"m": str(self.counters[pool])}},
                    )
                )
        return out

    def classes(self) -> list[DeviceClass]:
        return [device_class(name, cel) for name, (cel, _) in CLASSES.items()]

    def claim_objects(self) -> list[ResourceClaim]:
        objects = []
        for c in self.claims:
            b = claim(c.name)
            for r in c.requests:
                subs = []
                for i, (cls, count, sel, all_, tol) in enumerate(r.alternatives):
                    extra: dict[str, Any] = {"tolerations": [TOLERATE]} if tol else {}
                    selectors = [SELECTORS[sel][0]] if sel else []
                    if not r.prioritized:
                        b.request(r.name, cls, count, *selectors, all=all_, **extra)
                        continue
                    entry: dict[str, Any] = {"name": f"s{i}", "deviceClassName": cls, **extra}
                    entry.update({"allocationMode": "All"} if all_ else {"count": count})
                    if selectors:
                        entry["selectors"] = [{"cel": {"expression": selectors[0]}}]
                    subs.append(entry)
                if subs:
                    b.first_available(r.name, *subs)
            if c.constraint:
                kind, attribute = c.constraint
                (b.match if kind == "match" else b.distinct)(f"driver-a/{attribute}")
            objects.append(b.obj())
        return objects


@st.composite
def instances(draw: st.DrawFn) -> Instance:
    pools = draw(st.lists(st.sampled_from(["p1", "p2"]), min_size=1, max_size=2, unique=True))
    n = draw(st.integers(1, 5))
    devices = tuple(
        Dev(
            pool=draw(st.sampled_from(pools)),
            name=f"d{i}",
            color=draw(st.sampled_from(["red", "blue"])),
            numa=draw(st.integers(0, 1)),
            tainted=draw(st.integers(0, 3)) == 0,
            uses=draw(st.integers(0, 2)),
        )
        for i in range(n)
    )
    counter_pools = {d.pool for d in devices if d.uses}
    counters = {p: draw(st.integers(0, 4)) for p in counter_pools}
    claims = []
    for c in range(draw(st.integers(1, 2))):
        requests = []
        for r in range(draw(st.integers(1, 2))):
            alternatives = tuple(
                (
                    draw(st.sampled_from(sorted(CLASSES))),
                    draw(st.integers(1, 2)),
                    draw(st.none() | st.sampled_from(sorted(SELECTORS))),
                    draw(st.integers(0, 5)) == 0,
                    draw(st.booleans()),
                )
                for _ in range(draw(st.integers(1, 2)))
            )
            requests.append(Req(f"r{r}", alternatives))
        constraint = draw(
            st.none()
            | st.tuples(st.sampled_from(["match", "distinct"]), st.sampled_from(["color", "numa"]))
        )
        claims.append(Cl(f"c{c}", tuple(requests), constraint))
    allocated = frozenset(d.key for d in devices if draw(st.integers(0, 4)) == 0)
    return Instance(devices, counters, tuple(claims), allocated)


# --- the checker --------------------------------------------------------------------------


def _matches(d: Dev, cls: str, sel: str | None) -> bool:
    return CLASSES[cls][1](d.attrs) and (sel is None or SELECTORS[sel][1](d.attrs))


def check(inst: Instance, results: list[AllocationResult]) -> None:
    """Raise AssertionError unless ``results`` is a valid allocation of ``inst``."""
    by_key = {d.key: d for d in inst.devices}
    assert len(results) == len(inst.claims)
    used: Counter[str] = Counter()
    for c, result in zip(inst.claims, results, strict=True):
        taken: list[tuple[str, Dev]] = []
        for r in result.devices.results:
            key = f"{r.driver}/{r.pool}/{r.device}"
            assert key in by_key, key
            assert key not in inst.allocated, f"{key} is allocated already"
            used[key] += 1
            taken.append((r.request, by_key[key]))
        for req in c.requests:
            mine = [d for name, d in taken if name == req.name or name.startswith(req.name + "/")]
            names = {
                name for name, _ in taken if name == req.name or name.startswith(req.name + "/")
            }
            assert len(names) == 1, names
            (name,) = names
            index = int(name.split("/s")[1]) if req.prioritized else 0
            cls, count, sel, all_, tol = req.alternatives[index]
            assert all(_matches(d, cls, sel) for d in mine)
            assert tol or not any(d.tainted for d in mine)
            if all_:
                assert {d.key for d in mine} == {
                    d.key for d in inst.devices if _matches(d, cls, sel)
                }
            else:
                assert len(mine) == count
        if c.constraint:
            kind, attribute = c.constraint
            values = [d.attrs[attribute] for _, d in taken]
            assert len(set(values)) == (1 if kind == "match" else len(values)) or not values
    assert all(n == 1 for n in used.values()), f"used twice: {used}"
    for pool, available in inst.counters.items():
        # A device that consumes no counter is never held back by them (upstream).
        mine = sum(by_key[k].uses for k in used if by_key[k].pool == pool)
        held = sum(d.uses for d in inst.devices if d.pool == pool and d.key in inst.allocated)
        assert not mine or held + mine <= available, f"pool {pool}: {held}+{mine} > {available}"


# --- brute force ------------------------------------------------------------------------


def _options(inst: Instance, req: Req, free: list[Dev]) -> Iterator[list[Dev]]:
    for cls, count, sel, all_, tol in req.alternatives:
        fitting = [d for d in free if _matches(d, cls, sel) and (tol or not d.tainted)]
        if all_:
            every = [d for d in inst.devices if _matches(d, cls, sel)]
            if every and all(d in free and (tol or not d.tainted) for d in every):
                yield every
        else:
            yield from (list(combo) for combo in combinations(fitting, count))


def solvable(inst: Instance) -> bool:
    """Whether any assignment satisfies everything (exhaustive; tiny instances only)."""
    slots = [(c, req) for c in inst.claims for req in c.requests]
    free0 = [d for d in inst.devices if d.key not in inst.allocated]

    def constraints_hold(chosen: dict[str, list[Dev]]) -> bool:
        for c in inst.claims:
            if not c.constraint:
                continue
            kind, attribute = c.constraint
            values = [d.attrs[attribute] for req in c.requests for d in chosen[c.name + req.name]]
            if values and len(set(values)) != (1 if kind == "match" else len(values)):
                return False
        return True

    def counters_hold(devs: list[Dev]) -> bool:
        for pool, available in inst.counters.items():
            held = sum(d.uses for d in inst.devices if d.pool == pool and d.key in inst.allocated)
            mine = sum(d.uses for d in devs if d.pool == pool)
            if mine and held + mine > available:
                return False
        return True

    def walk(i: int, free: list[Dev], chosen: dict[str, list[Dev]]) -> bool:
        if i == len(slots):
            taken = [d for ds in chosen.values() for d in ds]
            return constraints_hold(chosen) and counters_hold(taken)
        c, req = slots[i]
        for option in _options(inst, req, free):
            chosen[c.name + req.name] = option
            if walk(i + 1, [d for d in free if d not in option], chosen):
                return True
            del chosen[c.name + req.name]
        return False

    return walk(0, free0, {})
