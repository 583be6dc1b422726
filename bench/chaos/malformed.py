"""A burst of objects no scheduler can use, which must never stop the others.

The embedded API server stores pods and PodGroups without validating their specs
(a real one would refuse some of these, but a CRD installed without its schema, an
older server or a buggy admission webhook lets such objects through): quantities
that do not parse, negative requests, PodGroups whose ``minMember`` is negative, zero
or not a number, negative timeouts, ``minResources`` that do not parse, and members
of a PodGroup that does not exist. Every name starts with ``bad-`` and carries the
``chaos.troupe.dev/kind: malformed`` label; the verdict leaves them out.
"""

from __future__ import annotations

import random
from typing import Any

from troupe.sim.apiserver.storage.store import Obj

from bench.chaos.workload import PODGROUPS, pod, pod_group

BAD_QUANTITIES = (
    ("cpu", "1x"),
    ("cpu", "lots"),
    ("cpu", "-500m"),
    ("memory", "-1Gi"),
    ("memory", "12345678901234567890123456789012345678901234567890Ei"),
    ("cpu", ""),
)
BAD_MIN_MEMBER: tuple[Any, ...] = (-1, 0, "three", None, 2.5)


def malformed_burst(serial: int, rng: random.Random) -> list[tuple[str, Obj]]:
    """(kind, object) of one burst: a few bad pods, bad PodGroups with members, and
    members of a missing group."""
    objects: list[tuple[str, Obj]] = []
    for i, (resource, value) in enumerate(rng.sample(BAD_QUANTITIES, 3)):
        cpu, memory = ("100m", value) if resource == "memory" else (value, "64Mi")
        objects.append(("pods", pod(f"bad-{serial}-q{i}", cpu, memory, "malformed")))
    for i, min_member in enumerate(rng.sample(BAD_MIN_MEMBER, 2)):
        name = f"bad-{serial}-g{i}"
        objects.append((PODGROUPS, pod_group(name, min_member)))
        for m in range(2):
            objects.append(("pods", pod(f"{name}-{m}", "50m", "64Mi", "malformed", group=name)))
    name = f"bad-{serial}-t"
    spec: dict[str, Any] = rng.choice(
        ({"scheduleTimeoutSeconds": -5}, {"minResources": {"cpu": "plenty"}})
    )
    objects.append((PODGROUPS, pod_group(name, 2, **spec)))
    for m in range(2):
        objects.append(("pods", pod(f"{name}-{m}", "50m", "64Mi", "malformed", group=name)))
    missing = f"bad-{serial}-missing"
    objects.append(("pods", pod(f"{missing}-0", "50m", "64Mi", "malformed", group=missing)))
    return objects
