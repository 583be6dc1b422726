"""Gang scheduling in process: the pod-group cycle, all or nothing."""

from __future__ import annotations

import asyncio

import pytest
from troupe.api.client import ApiError
from troupe.api.gangs import GangApi

from tests.plugins.builders import make_node
from tests.scheduler.gang_helpers import coscheduling_group, member, native_group, workload
from tests.scheduler.harness import Harness


def nodes(n: int, cpu: str = "1") -> list:
    return [
        make_node().name(f"n{i}").capacity(cpu=cpu, memory="8Gi", pods=110).obj() for i in range(n)
    ]


def bound(h: Harness, group: str) -> list[str]:
    return sorted(k for k, _ in h.client.bindings if k.split("/")[1].startswith(f"{group}-"))


async def test_a_gang_that_fits_is_bound_whole() -> None:
    h = Harness().nodes(nodes(4))
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("train", 4))
    h.pods(member("train", i) for i in range(4))
    await h.settle()
    assert len(bound(h, "train")) == 4
    await h.close()


async def test_a_gang_of_4_with_3_feasible_nodes_is_rejected_whole() -> None:
    h = Harness().nodes(nodes(3))
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("train", 4))
    h.pods(member("train", i) for i in range(4))
    await h.settle()
    assert h.client.bindings == []
    assert h.scheduler.cache.table.requested[0].sum() == 0  # nothing held
    reasons = sorted(c.reason for c in h.client.conditions.values())
    assert reasons == ["CoschedulingNotMeetMinMember"] * 3 + ["Unschedulable"]
    message = next(iter(h.client.conditions.values())).message
    # (A preemption part may follow the FitError, as upstream's.)
    assert message.startswith(
        "gang default/train: 3 of 4 required pods fit; 0/3 nodes are available: 3 Insufficient cpu."
    )
    group_events = [e for e in h.client.events if e.regarding.kind == "PodGroup"]
    assert [e.reason for e in group_events] == ["FailedScheduling"]
    await h.close()


async def test_a_gang_waits_until_min_member_pods_exist() -> None:
    h = Harness().nodes(nodes(4))
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("train", 3))
    h.pods(member("train", i) for i in range(2))
    await h.settle()
    assert h.client.bindings == []
    assert h.scheduler.queue.pending_counts()["gated"] == 2
    h.pods([member("train", 2)])
    await h.settle()
    assert len(bound(h, "train")) == 3
    await h.close()


async def test_a_gang_waits_for_its_group_object() -> None:
    h = Harness().nodes(nodes(4))
    h.pods(member("train", i) for i in range(2))
    await h.settle()
    assert h.client.bindings == []
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("train", 2))
    await h.settle()
    assert len(bound(h, "train")) == 2
    await h.close()


async def test_members_beyond_quorum_that_do_not_fit_are_the_remainder() -> None:
    h = Harness().nodes(nodes(5))
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("train", 4))
    h.pods(member("train", i) for i in range(6))
    await h.settle()
    assert len(bound(h, "train")) == 5
    assert h.scheduler.queue.pending_counts()["unschedulable"] == 1
    # A node arrives: the remainder is scheduled without a new quorum.
    h.handlers.on_node_add(make_node().name("late").capacity(cpu="1", pods=110).obj())
    await h.advance(20)
    await h.settle()
    assert len(bound(h, "train")) == 6
    await h.close()


async def test_a_member_arriving_after_quorum_is_scheduled_at_once() -> None:
    h = Harness().nodes(nodes(4))
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("train", 2))
    h.pods(member("train", i) for i in range(2))
    await h.settle()
    h.pods([member("train", 2)])
    await h.settle()
    assert len(bound(h, "train")) == 3
    await h.close()


@pytest.mark.parametrize("first", ["a", "b"], ids=["a submitted first", "b submitted first"])
async def test_two_gangs_needing_60_percent_each_never_deadlock(first: str) -> None:
    h = Harness().nodes(nodes(10))
    order = ["a", "b"] if first == "a" else ["b", "a"]
    for g in order:
        h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group(g, 6))
    for g in order:
        h.pods(member(g, i) for i in range(6))
    await h.settle()
    counts = {g: len(bound(h, g)) for g in "ab"}
    assert sorted(counts.values()) == [0, 6]
    winner = "a" if counts["a"] else "b"
    loser = "b" if winner == "a" else "a"
    # The winner finishes: its pods go away and the loser is placed whole.
    for i in range(6):
        pod = member(winner, i).model_copy(deep=True)
        pod.spec.node_name = h.client.node_of(f"default/{winner}-{i}") or ""
        h.handlers.on_pod_delete(pod)
    await h.advance(20)
    await h.settle()
    assert len(bound(h, loser)) == 6
    await h.close()


async def test_five_gangs_with_room_for_two_bind_two_whole_and_nothing_else() -> None:
    h = Harness().nodes(nodes(10))
    for g in "abcde":
        h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group(g, 5))
        h.pods(member(g, i) for i in range(5))
    await h.settle()
    counts = sorted(len(bound(h, g)) for g in "abcde")
    assert counts == [0, 0, 0, 5, 5]
    await h.close()


async def test_a_workload_gang_per_replica_key() -> None:
    h = Harness().nodes(nodes(4))
    h.handlers.on_group_add(GangApi.WORKLOAD, workload("job", {"workers": 2}))
    h.pods(member("job", i, api="workload", replica="r0") for i in range(2))
    h.pods(member("job", i, api="workload", replica="r1") for i in range(2, 3))
    await h.settle()
    assert len(h.client.bindings) == 2  # r1 has only one of its two members
    await h.close()


async def test_a_native_pod_group_gets_pod_group_scheduled() -> None:
    h = Harness().nodes(nodes(2))
    h.handlers.on_group_add(GangApi.POD_GROUP, native_group("pg", 2))
    h.pods(member("pg", i, api="podgroup") for i in range(2))
    await h.settle()
    assert len(h.client.bindings) == 2
    (path, patch) = h.client.patches[-1]
    assert path.endswith("/podgroups/pg/status")
    (condition,) = patch["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodGroupScheduled",
        "True",
        "Scheduled",
    )
    await h.close()


async def test_a_refused_binding_that_breaks_quorum_stops_the_rest_and_retries() -> None:
    h = Harness().nodes(nodes(4))
    h.client.bind_errors["default/train-1"] = [ApiError(403, "forbidden by a webhook")]
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("train", 4))
    h.pods(member("train", i) for i in range(4))
    await h.settle()
    # One member was bound before the refusal; the others were not posted, and
    # wait out the group's backoff.
    assert bound(h, "train") == ["default/train-0"]
    released = [k for k, c in h.client.conditions.items() if "released and retried" in c.message]
    assert sorted(released) == ["default/train-2", "default/train-3"]
    assert h.client.conditions["default/train-1"].reason == "SchedulerError"
    assert h.scheduler.cache.assumed_count == 0
    # The retry places the three others; with the bound one the gang is whole.
    await h.advance(20)
    await h.settle()
    assert len(bound(h, "train")) == 4
    await h.close()


COSCHEDULING_PROFILE = {
    "profiles": [
        {
            "plugins": {
                "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                "queueSort": {
                    "enabled": [{"name": "Coscheduling"}],
                    "disabled": [{"name": "*"}],
                },
            },
            "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}],
        }
    ]
}


async def test_the_coscheduling_baseline_with_two_gangs_of_60_percent() -> None:
    """What scheduler-plugins' algorithm does in the two-gang case: its QueueSort
    keeps a gang's pods together, so the first gang passes the Permit barrier. The
    second gang's pods are placed one by one and held at Permit until a member
    fails Filter; PostFilter then rejects the waiting ones ("optimistic
    rejection"). No deadlock here, but every retry of the losing gang assumes and
    throws away four placements, where troupe's pod-group cycle decides in one
    attempt without holding anything."""
    h = Harness(COSCHEDULING_PROFILE).nodes(nodes(10))
    for g in "ab":
        h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group(g, 6))
    for g in "ab":
        h.pods(member(g, i) for i in range(6))
    await h.settle()
    counts = {g: len(bound(h, g)) for g in "ab"}
    assert sorted(counts.values()) == [0, 6]
    loser = "a" if counts["a"] == 0 else "b"
    assert h.scheduler.cache.assumed_count == 0 and len(h.scheduler.waiting) == 0
    messages = [
        c.message for k, c in h.client.conditions.items() if k.startswith(f"default/{loser}-")
    ]
    assert messages.count("optimistic rejection in PostFilter") == 4
    # Per-pod attempts: the loser cost 6 scheduling cycles; troupe spends one
    # pod-group cycle on it (see test_two_gangs_needing_60_percent_each_never_deadlock).
    assert h.scheduler.stats.results["unschedulable"] >= 6
    await h.close()


async def test_a_gang_waiting_past_its_timeout_is_reported_once_per_period() -> None:
    h = Harness().nodes(nodes(2))
    h.handlers.on_group_add(
        GangApi.COSCHEDULING, coscheduling_group("big", 3, scheduleTimeoutSeconds=30)
    )
    h.pods(member("big", i) for i in range(3))
    await h.settle()
    assert h.parts.gang_timeouts.sweep() == []
    h.clock.advance(31)
    assert h.parts.gang_timeouts.sweep() == ["default/big"]
    assert h.parts.gang_timeouts.sweep() == []  # not again within the period
    await h.settle()
    message = h.client.conditions["default/big-0"].message
    assert message.startswith("gang default/big: not scheduled within its schedule timeout (30s)")
    group_events = [e.note for e in h.client.events if e.regarding.kind == "PodGroup"]
    assert any("schedule timeout" in note for note in group_events)
    await h.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_batched_placement_chooses_what_the_pod_cycle_would(seed: int) -> None:
    """Nodes of distinct sizes (no score ties): a gang placed as a batch lands
    exactly where member-by-member placement puts it."""

    async def placement(batching: bool) -> list[tuple[str, str]]:
        cluster = [
            make_node()
            .name(f"n{i}")
            .capacity(cpu=str(2 + i), memory=f"{4 + 3 * i}Gi", pods=110)
            .obj()
            for i in range(8)
        ]
        h = Harness(seed=seed, batching=batching).nodes(cluster)
        h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("train", 12))
        h.pods(member("train", i, cpu="500m") for i in range(12))
        await h.settle()
        await h.close()
        return sorted(h.client.bindings)

    batched, per_pod = await placement(True), await placement(False)
    assert len(batched) == 12
    assert batched == per_pod


async def test_coscheduling_gangs_larger_than_the_binding_concurrency_are_bound() -> None:
    """Pods waiting at the Permit barrier must not hold binding slots, or a gang
    larger than bindingConcurrency would never reach its quorum."""
    h = Harness({**COSCHEDULING_PROFILE, "bindingConcurrency": 4}).nodes(nodes(10))
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("wide", 10))
    h.pods(member("wide", i) for i in range(10))
    # A deadlock would block the loop on a binding slot forever.
    await asyncio.wait_for(h.settle(), timeout=20)
    assert len(bound(h, "wide")) == 10
    await h.close()
