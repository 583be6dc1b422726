"""Gangs competing for the same capacity, in process on the fake clock.

Two gangs that each need 60% of the cluster, and five gangs with room for two,
submitted together at equal priority in every order: troupe's pod-group cycle
binds the earliest gangs whole (KEP-3370 QueueSort: priority, then the group's
creation time, then its key), the others hold nothing, and each waiting gang is
placed as soon as capacity is freed. A waiting gang is retried only when the
cluster changes or the unschedulable pool is flushed (no livelock).

The second half runs the same cases on the Coscheduling baseline (scheduler-plugins'
Permit barrier) and records what it does.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.contention import (
    Ending,
    Order,
    bound,
    bound_counts,
    cpu_in_use,
    created_at,
    finish,
    group_entity,
    one_cpu_nodes,
    run_cycles,
    submit,
)
from tests.scheduler.harness import Harness

# podMaxInUnschedulablePodsDuration's default: the periodic flush of the
# unschedulable pool moves an entity that waited this long.
UNSCHEDULABLE_FLUSH = 300
# podMaxBackoffSeconds' default: a gang retried on a cluster event still waits out
# its backoff first (it failed an attempt a moment ago on the fake clock).
MAX_BACKOFF = 10

ORDERS = [
    pytest.param(["a", "b"], "listed", id="a then b"),
    pytest.param(["b", "a"], "listed", id="b then a"),
    pytest.param(["b", "a"], "interleaved", id="members interleaved"),
]
ENDINGS: list[Ending] = ["deleted", "succeeded"]


# --- two gangs of 60% ------------------------------------------------------------------


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize(("groups", "order"), ORDERS)
async def test_same_creation_time_the_first_key_wins_and_the_other_follows(
    groups: list[str], order: Order, ending: Ending
) -> None:
    h = Harness().nodes(one_cpu_nodes(10))
    submit(h, groups, 6, order=order)
    # One pod-group cycle per gang, then the loop is idle.
    assert await run_cycles(h, 20) == (2, 0)
    await h.settle()
    # KEP-3370 QueueSort: same priority, same creation time -> key order.
    assert bound_counts(h, "ab") == {"a": 6, "b": 0}
    # The loser holds nothing: only the winner's six cpus are accounted.
    assert h.scheduler.cache.assumed_count == 0
    assert cpu_in_use(h) == 6000
    assert len(h.scheduler.waiting) == 0
    finish(h, "a", 6, ending)
    await h.advance(MAX_BACKOFF)
    assert await run_cycles(h, 20) == (1, 0)
    await h.settle()
    assert bound_counts(h, "ab") == {"a": 6, "b": 6}
    await h.close()


@pytest.mark.parametrize("api", ["coscheduling", "workload", "podgroup"])
@pytest.mark.parametrize(("groups", "order"), ORDERS)
async def test_the_earlier_created_gang_wins_whatever_its_name(
    groups: list[str], order: Order, api: str
) -> None:
    """b is created before a: QueueSort's creation-time order decides, not the key,
    whichever API declares the gangs."""
    h = Harness().nodes(one_cpu_nodes(10))
    created = {"a": created_at(5), "b": created_at(0)}
    submit(h, groups, 6, created=created, order=order, api=api)
    await h.settle()
    assert bound_counts(h, "ab") == {"a": 0, "b": 6}
    assert h.scheduler.cache.assumed_count == 0 and cpu_in_use(h) == 6000
    finish(h, "b", 6, "deleted", api)
    await h.advance(MAX_BACKOFF)
    await h.settle()
    assert bound_counts(h, "ab") == {"a": 6, "b": 6}
    await h.close()


async def test_a_waiting_gang_is_retried_only_on_cluster_events_and_flushes() -> None:
    h = Harness().nodes(one_cpu_nodes(10))
    submit(h, ["a", "b"], 6)
    await h.settle()
    assert group_entity(h, "b").attempts == 1
    # Time passes (backoff expires many times over) and nothing changes: no retry.
    for _ in range(8):
        await h.advance(30)
        assert await run_cycles(h, 20) == (0, 0)
    assert group_entity(h, "b").attempts == 1
    assert h.scheduler.queue.where_group("default/b") == "unschedulable"
    # The periodic flush of the unschedulable pool: exactly one more attempt.
    await h.advance(UNSCHEDULABLE_FLUSH)
    assert await run_cycles(h, 20) == (1, 0)
    await h.advance(30)
    assert await run_cycles(h, 20) == (0, 0)
    assert group_entity(h, "b").attempts == 2
    # A cluster event that frees too little (one more 1-cpu node: 5 free, 6
    # needed) costs at most one attempt, after the backoff.
    h.nodes(one_cpu_nodes(11)[10:])
    await h.advance(MAX_BACKOFF)
    assert (await run_cycles(h, 20))[0] <= 1
    await h.advance(30)
    assert await run_cycles(h, 20) == (0, 0)
    assert group_entity(h, "b").attempts <= 3
    assert bound(h, "b") == []
    # The winner finishes: one more attempt places the gang whole.
    failed = h.scheduler.stats.group_results["unschedulable"]
    assert failed == group_entity(h, "b").attempts
    finish(h, "a", 6, "deleted")
    await h.advance(MAX_BACKOFF)
    assert await run_cycles(h, 20) == (1, 0)
    await h.settle()
    assert len(bound(h, "b")) == 6
    assert h.scheduler.queue.get_group("default/b") is None
    assert h.scheduler.stats.group_results["unschedulable"] == failed
    await h.close()


# --- five gangs, room for two --------------------------------------------------------

# Named against their creation order so key order and creation order disagree.
FIVE = ["e", "d", "c", "b", "a"]
FIVE_CREATED = {g: created_at(i) for i, g in enumerate(FIVE)}
FIVE_ORDERS = [pytest.param(o, id=o) for o in ("listed", "interleaved", "reversed")]


def submit_five(h: Harness, order: str) -> None:
    groups = list(reversed(FIVE)) if order == "reversed" else FIVE
    how: Order = "interleaved" if order == "interleaved" else "listed"
    submit(h, groups, 5, created=FIVE_CREATED, order=how)


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("order", FIVE_ORDERS)
async def test_five_gangs_with_room_for_two_run_two_at_a_time_in_creation_order(
    order: str, ending: Ending
) -> None:
    h = Harness().nodes(one_cpu_nodes(10))
    submit_five(h, order)
    assert await run_cycles(h, 50) == (5, 0)
    await h.settle()
    assert bound_counts(h, FIVE) == {"e": 5, "d": 5, "c": 0, "b": 0, "a": 0}
    assert h.scheduler.cache.assumed_count == 0 and cpu_in_use(h) == 10_000
    attempts = {g: group_entity(h, g).attempts for g in "cba"}
    assert attempts == {"c": 1, "b": 1, "a": 1}
    # Each time the oldest running gang ends, the oldest waiting gang is placed
    # whole and the rest stay at zero.
    steps = [("e", "c", ["b", "a"]), ("d", "b", ["a"]), ("c", "a", [])]
    for finished, placed, waiting in steps:
        finish(h, finished, 5, ending)
        await h.advance(MAX_BACKOFF)
        # One cycle for the gang placed, one per gang still waiting.
        assert await run_cycles(h, 50) == (1 + len(waiting), 0)
        await h.settle()
        assert len(bound(h, placed)) == 5, bound_counts(h, FIVE)
        assert h.scheduler.queue.get_group(f"default/{placed}") is None
        for g in waiting:
            assert bound(h, g) == []
            # One retry per batch of freed capacity, not one per freed pod.
            attempts[g] += 1
            assert group_entity(h, g).attempts == attempts[g]
        assert h.scheduler.cache.assumed_count == 0
        assert cpu_in_use(h) == 10_000
    await h.close()


# --- the Coscheduling baseline ---------------------------------------------------------


def coscheduling(**args: int) -> dict[str, Any]:
    """scheduler-plugins' documented profile (docs/migrating-from-coscheduling.md)."""
    return {
        "profiles": [
            {
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                    "queueSort": {
                        "enabled": [{"name": "Coscheduling"}],
                        "disabled": [{"name": "*"}],
                    },
                },
                "pluginConfig": [
                    {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10, **args}}
                ],
            }
        ]
    }


@pytest.mark.parametrize(("groups", "order"), ORDERS)
async def test_coscheduling_baseline_two_gangs_of_60_percent_livelocks(
    groups: list[str], order: Order
) -> None:
    """scheduler-plugins' algorithm with its default args on the same case. Its
    QueueSort also orders by group creation time, so b (created first) is bound
    whole and a never gets a pod bound: the outcome is right. But the loser spins.
    Its pods are placed one by one and four of them wait at Permit on the last
    four free nodes; the fifth fails Filter and PostFilter rejects the waiting
    siblings ("optimistic rejection"); the next member to reach Permit activates
    its rejected siblings again (ActivateSiblings), and so on. With
    podGroupBackoffSeconds 0 nothing stops the round: the loop never goes idle
    although the clock does not move and nothing in the cluster changes."""
    h = Harness(coscheduling()).nodes(one_cpu_nodes(10))
    submit(h, groups, 6, created={"a": created_at(5), "b": created_at(0)}, order=order)
    cycles, held = await run_cycles(h, 200, watch="default/a-")
    assert cycles == 200  # still busy: a livelock, not a wait
    assert h.scheduler.queue.pending_counts()["active"] > 0
    assert h.scheduler.stats.results["unschedulable"] >= 150
    assert held == 4
    assert bound_counts(h, "ab") == {"a": 0, "b": 6}
    # Once the winner's pods are gone the members still queued join the ones
    # waiting at Permit, and the loser passes the barrier whole.
    finish(h, "b", 6, "deleted")
    assert (await run_cycles(h, 200))[0] < 200
    await h.settle()
    assert bound_counts(h, "ab") == {"a": 6, "b": 6}
    assert h.scheduler.cache.assumed_count == 0 and len(h.scheduler.waiting) == 0
    await h.close()


@pytest.mark.parametrize(("groups", "order"), ORDERS)
async def test_coscheduling_baseline_with_group_backoff_retries_once_per_period(
    groups: list[str], order: Order
) -> None:
    """podGroupBackoffSeconds, scheduler-plugins' answer to the spin above: the
    rejected gang is refused in PreFilter until the period ends. The loop goes idle,
    but the loser is still retried every period with nothing changed in the
    cluster, each round placing four pods at Permit and throwing them away;
    troupe's waiting gang costs nothing until a cluster event
    (test_a_waiting_gang_is_retried_only_on_cluster_events_and_flushes)."""
    h = Harness(coscheduling(podGroupBackoffSeconds=5)).nodes(one_cpu_nodes(10))
    submit(h, groups, 6, created={"a": created_at(5), "b": created_at(0)}, order=order)
    cycles, held = await run_cycles(h, 200, watch="default/a-")
    assert cycles == 12  # six for b, six for a
    assert held == 4
    assert bound_counts(h, "ab") == {"a": 0, "b": 6}
    assert h.scheduler.cache.assumed_count == 0 and len(h.scheduler.waiting) == 0
    messages = [c.message for k, c in h.client.conditions.items() if k.startswith("default/a-")]
    assert messages.count("optimistic rejection in PostFilter") == 4
    for _ in range(3):
        before = h.scheduler.stats.results["unschedulable"]
        await h.advance(MAX_BACKOFF)
        cycles, held = await run_cycles(h, 200, watch="default/a-")
        assert (cycles, held) == (6, 4)
        assert h.scheduler.stats.results["unschedulable"] == before + 6
    assert bound_counts(h, "ab") == {"a": 0, "b": 6}
    finish(h, "b", 6, "deleted")
    await h.advance(MAX_BACKOFF)
    await run_cycles(h, 200)
    await h.settle()
    assert bound_counts(h, "ab") == {"a": 6, "b": 6}
    await h.close()


@pytest.mark.parametrize("order", FIVE_ORDERS)
async def test_coscheduling_baseline_five_gangs_with_room_for_two(order: str) -> None:
    """With exactly two gangs' worth of nodes, the two earliest gangs fill the
    cluster and every member of the others fails Filter outright: nothing of theirs
    is held at Permit, the loop goes idle, and the outcome is troupe's. Each waiting
    gang costs one failed cycle per member (15 here) where troupe spends one
    pod-group cycle per gang."""
    h = Harness(coscheduling()).nodes(one_cpu_nodes(10))
    submit_five(h, order)
    # 25 cycles, one per member, and idle; the winners' members wait at Permit
    # only until their fifth arrives.
    assert await run_cycles(h, 200, watch="default/") == (25, 4)
    assert bound_counts(h, FIVE) == {"e": 5, "d": 5, "c": 0, "b": 0, "a": 0}
    assert h.scheduler.cache.assumed_count == 0 and len(h.scheduler.waiting) == 0
    assert h.scheduler.stats.results["unschedulable"] == 15
    await h.advance(MAX_BACKOFF)
    assert await run_cycles(h, 200) == (0, 0)
    for finished, placed in zip(["e", "d", "c"], ["c", "b", "a"], strict=True):
        finish(h, finished, 5, "deleted")
        await h.advance(MAX_BACKOFF)
        await run_cycles(h, 200)
        await h.settle()
        assert len(bound(h, placed)) == 5, bound_counts(h, FIVE)
    assert all(len(bound(h, g)) == 5 for g in FIVE)
    await h.close()
