"""The shape of a chaos run, and the seeded order of its faults.

``Settings`` is what differs between ``--quick`` and the long run: cluster size, how
often each fault kind is injected, the pauses between faults, how long the system
gets to settle. ``fault_order`` turns ``--seed`` into the order of the faults (each
kind ``repeats`` times, shuffled); the pauses between them and every parameter a
fault draws (which gang, how many members bound before the kill, how long a burst
lasts) come from the same seeded ``random.Random``, so one seed names one plan.
What the cluster does in between (which replica leads, how fast it binds) is not
seeded: the faults land on whatever is happening.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

FAULT_KINDS: Final = (
    "watch_cut",
    "watch_expired",
    "api_5xx",
    "api_429",
    "binding_409",
    "slow_responses",
    "kill_leader_mid_burst",
    "kill_leader_mid_gang",
    "room_taken_mid_gang",
    "pause_leader",
    "lease_deleted",
    "lease_stolen",
    "lease_zero_duration",
    "node_deleted_mid_gang",
    "podgroup_deleted_mid_cycle",
    "malformed_burst",
    "pod_updates_mid_gang",
    "recreate_pods",
    "recreate_gang",
)
"""Every fault kind, as named in ``faults_injected``."""


@dataclass(frozen=True, slots=True)
class Lease:
    """The replicas' leader election: short, so takeovers happen within the run."""

    duration: float = 4.0
    renew_deadline: float = 2.5
    retry_period: float = 0.5
    name: str = "troupe-chaos"
    namespace: str = "kube-system"


@dataclass(frozen=True, slots=True)
class Settings:
    nodes: int
    node_cpu: str
    node_memory: str
    repeats: int  # injections of each fault kind
    pause: tuple[float, float]  # seconds between two faults
    wave_every: tuple[float, float]  # seconds between two arrivals of new work
    settle_seconds: float  # at most, after the faults stop
    qps: float  # clientConnection.qps: bindings slow enough to kill a leader mid-gang
    burst: int
    target_cpu_share: float  # old work is retired above this share of the cluster's CPU
    lease: Lease = Lease()


QUICK: Final = Settings(
    nodes=10,
    node_cpu="8",
    node_memory="32Gi",
    repeats=1,
    pause=(0.3, 1.0),
    wave_every=(1.5, 3.0),
    settle_seconds=45.0,
    qps=25.0,
    burst=10,
    target_cpu_share=0.4,
)
LONG: Final = Settings(
    nodes=20,
    node_cpu="8",
    node_memory="32Gi",
    repeats=4,
    pause=(0.5, 3.0),
    wave_every=(1.0, 3.0),
    settle_seconds=120.0,
    qps=25.0,
    burst=10,
    target_cpu_share=0.45,
)


def fault_order(kinds: tuple[str, ...], repeats: int, rng: random.Random) -> list[str]:
    """Every kind ``repeats`` times, shuffled; no kind twice in a row when avoidable."""
    order = [kind for kind in kinds for _ in range(repeats)]
    rng.shuffle(order)
    for i in range(1, len(order)):
        if order[i] == order[i - 1]:
            swap = next((j for j in range(i + 1, len(order)) if order[j] != order[i]), None)
            if swap is not None:
                order[i], order[swap] = order[swap], order[i]
    return order
