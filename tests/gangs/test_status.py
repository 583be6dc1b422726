"""Group status: the scheduler-plugins PodGroup phase machine, the status controller's
coalesced, rate-limited writes, and the v1alpha2 PodGroupScheduled condition."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.client import ApiError
from troupe.api.clock import FakeClock
from troupe.api.gangapi import Condition, CoschedulingPodGroup, CoschedulingPodGroupStatus
from troupe.api.gangs import POD_GROUP_LABEL
from troupe.api.objects import Pod
from troupe.scheduler.gangs import (
    PodGroupStatusController,
    conditions_patch,
    coscheduling_status,
    pod_group_scheduled_condition,
)
from troupe.scheduler.kube.client import rfc3339

NS = "team-a"
NOW = 1_800_000_000.0
START = rfc3339(NOW)
EARLIER = "2026-01-01T00:00:00Z"


def group(min_member: int = 3, **status: Any) -> CoschedulingPodGroup:
    return CoschedulingPodGroup.model_validate(
        {
            "metadata": {"name": "pg", "namespace": NS, "uid": "u1"},
            "spec": {"minMember": min_member},
            "status": status,
        }
    )


def pod(
    name: str,
    phase: str = "Pending",
    *,
    group_name: str = "pg",
    namespace: str = NS,
    owners: tuple[str, ...] = (),
    created: str = EARLIER,
) -> Pod:
    return Pod.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {POD_GROUP_LABEL: group_name},
                "creationTimestamp": created,
                "ownerReferences": [{"kind": "Job", "name": o, "uid": o} for o in owners],
            },
            "status": {"phase": phase},
        }
    )


def pods(*phases: str) -> list[Pod]:
    return [pod(f"p{i}", phase) for i, phase in enumerate(phases)]


# --- the phase machine --------------------------------------------------------------------

PHASES = [
    pytest.param({}, [], "Pending", (0, 0, 0), id="a new group with no pods is Pending"),
    pytest.param(
        {},
        pods("Pending", "Pending"),
        "Pending",
        (0, 0, 0),
        id="fewer pods than minMember is Pending",
    ),
    pytest.param(
        {},
        pods("Pending", "Pending", "Pending"),
        "Scheduling",
        (0, 0, 0),
        id="minMember pods existing is Scheduling",
    ),
    pytest.param(
        {"phase": "Pending"},
        pods("Running", "Running", "Pending"),
        "Scheduling",
        (2, 0, 0),
        id="fewer than minMember running is Scheduling",
    ),
    pytest.param(
        {"phase": "Scheduling"},
        pods("Running", "Running", "Running"),
        "Running",
        (3, 0, 0),
        id="minMember running is Running",
    ),
    pytest.param(
        {},
        pods("Running", "Succeeded", "Running"),
        "Running",
        (2, 1, 0),
        id="running and succeeded together reach minMember: Running",
    ),
    pytest.param(
        {"phase": "Running"},
        pods("Succeeded", "Succeeded", "Succeeded"),
        "Finished",
        (0, 3, 0),
        id="minMember succeeded is Finished",
    ),
    pytest.param(
        {"phase": "Running"},
        pods("Failed", "Running", "Running"),
        "Failed",
        (2, 0, 1),
        id="a failure with minMember started is Failed",
    ),
    pytest.param(
        {"phase": "Scheduling"},
        pods("Failed", "Running", "Pending"),
        "Scheduling",
        (1, 0, 1),
        id="a failure before minMember started is still Scheduling",
    ),
    pytest.param(
        {"phase": "Running"},
        pods("Failed", "Succeeded", "Succeeded", "Succeeded"),
        "Finished",
        (0, 3, 1),
        id="minMember succeeded is Finished even with a failure",
    ),
    pytest.param(
        {"phase": "Running", "running": 3},
        pods("Running", "Running"),
        "Pending",
        (2, 0, 0),
        id="a running group losing members below minMember is Pending again",
    ),
    pytest.param(
        {"phase": "Unknown"},
        pods("Running", "Running", "Running"),
        "Running",
        (3, 0, 0),
        id="Unknown follows the pods like Scheduling",
    ),
    pytest.param(
        {"phase": "Finished", "succeeded": 3},
        [],
        "Finished",
        (0, 3, 0),
        id="Finished is final even when the pods are gone",
    ),
    pytest.param(
        {"phase": "Failed", "failed": 1, "running": 2},
        pods("Running", "Running", "Running"),
        "Failed",
        (2, 0, 1),
        id="Failed is final",
    ),
    pytest.param(
        {"phase": "Pending", "running": 5},
        pods("Running"),
        "Pending",
        (1, 0, 0),
        id="counts follow the pods while Pending",
    ),
]


@pytest.mark.parametrize(("status", "members", "phase", "counts"), PHASES)
def test_phase(
    status: dict[str, Any], members: list[Pod], phase: str, counts: tuple[int, int, int]
) -> None:
    result = coscheduling_status(group(3, **status), members, NOW)
    assert result.phase == phase
    assert (result.running, result.succeeded, result.failed) == counts


def test_an_invalid_min_member_only_gets_counts() -> None:
    result = coscheduling_status(group(0), pods("Running", "Succeeded"), NOW)
    assert (result.phase, result.running, result.succeeded) == ("Pending", 1, 1)
    assert result.schedule_start_time is None


START_TIMES = [
    pytest.param({}, pods("Pending"), None, id="no start time while Pending"),
    pytest.param(
        {},
        pods("Pending", "Pending", "Pending"),
        START,
        id="the start time is set on leaving Pending",
    ),
    pytest.param(
        {"phase": "Scheduling", "scheduleStartTime": EARLIER},
        pods("Running", "Running", "Running"),
        EARLIER,
        id="the start time is never moved",
    ),
    pytest.param(
        {"phase": "Running", "scheduleStartTime": EARLIER},
        pods("Running"),
        EARLIER,
        id="the start time is kept when the group falls back to Pending",
    ),
]


@pytest.mark.parametrize(("status", "members", "expected"), START_TIMES)
def test_schedule_start_time(
    status: dict[str, Any], members: list[Pod], expected: str | None
) -> None:
    assert coscheduling_status(group(3, **status), members, NOW).schedule_start_time == expected


OCCUPIED = [
    pytest.param(
        [pod("a", owners=("job-1",))], "team-a/job-1", id="occupiedBy is the members' owner"
    ),
    pytest.param(
        [pod("a", owners=("z", "b"))],
        "team-a/b,team-a/z",
        id="several owners are sorted and joined",
    ),
    pytest.param(
        [
            pod("b", owners=("new",), created="2026-01-02T00:00:00Z"),
            pod("a", owners=("old",), created="2026-01-01T00:00:00Z"),
        ],
        "team-a/old",
        id="the oldest member's owners are taken",
    ),
    pytest.param([pod("a")], "", id="members without owners leave occupiedBy empty"),
]


@pytest.mark.parametrize(("members", "expected"), OCCUPIED)
def test_occupied_by(members: list[Pod], expected: str) -> None:
    assert coscheduling_status(group(1), members, NOW).occupied_by == expected


def test_occupied_by_is_kept_once_set() -> None:
    status = coscheduling_status(
        group(1, phase="Running", occupiedBy="team-a/x"), pods("Running"), NOW
    )
    assert status.occupied_by == "team-a/x"


def follow(min_member: int, steps: list[list[str]]) -> list[str]:
    pg = group(min_member)
    phases = []
    for now, step in enumerate(steps):
        status = coscheduling_status(pg, pods(*step), NOW + now)
        pg = pg.model_copy(update={"status": status})
        phases.append(status.phase)
    return phases


def test_status_follows_pods_from_pending_to_finished() -> None:
    assert follow(
        2,
        [
            [],
            ["Pending"],
            ["Pending", "Pending"],
            ["Running", "Pending"],
            ["Running", "Running"],
            ["Succeeded", "Running"],
            ["Succeeded", "Succeeded"],
            [],
        ],
    ) == [
        "Pending",
        "Pending",
        "Scheduling",
        "Scheduling",
        "Running",
        "Running",
        "Finished",
        "Finished",
    ]


def test_status_follows_pods_from_running_to_failed() -> None:
    assert follow(
        2, [["Pending", "Pending"], ["Running", "Running"], ["Running", "Failed"], []]
    ) == [
        "Scheduling",
        "Running",
        "Failed",
        "Failed",
    ]


@settings(max_examples=150)
@given(
    st.sampled_from(["", "Pending", "Scheduling", "Running", "Unknown"]),
    st.integers(min_value=1, max_value=5),
    st.lists(st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"]), max_size=8),
)
def test_the_status_is_a_fixed_point_that_counts_the_pods(
    phase: str, min_member: int, phases: list[str]
) -> None:
    members = pods(*phases)
    status = coscheduling_status(group(min_member, phase=phase), members, NOW)
    again = coscheduling_status(
        group(min_member).model_copy(update={"status": status}), members, NOW + 5
    )
    assert again == status
    assert (status.running, status.succeeded, status.failed) == (
        phases.count("Running"),
        phases.count("Succeeded"),
        phases.count("Failed"),
    )
    assert status.phase != ""


# --- the controller -------------------------------------------------------------------------


class Patches:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.failures: list[ApiError] = []

    async def __call__(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self.paths.append(path)
        if self.failures:
            raise self.failures.pop(0)
        self.bodies.append(dict(body["status"]))
        return {"metadata": {"resourceVersion": str(len(self.paths))}}

    def phases(self) -> list[str]:
        return [b["phase"] for b in self.bodies]


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


@pytest.fixture
async def ctl() -> Any:
    clock = FakeClock(start=100.0)
    patches = Patches()
    controller = PodGroupStatusController(patches, clock, min_interval=1.0)
    yield controller, patches, clock
    await controller.close()


Ctl = tuple[PodGroupStatusController, Patches, FakeClock]


async def test_a_new_group_is_written_pending_at_once(ctl: Ctl) -> None:
    controller, patches, _ = ctl
    controller.on_group_add(group(2))
    await settle()
    assert patches.paths == [
        f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups/pg/status"
    ]
    assert patches.bodies == [{"phase": "Pending", "running": 0, "succeeded": 0, "failed": 0}]


async def test_status_follows_the_pods_one_write_per_second(ctl: Ctl) -> None:
    controller, patches, clock = ctl
    controller.on_group_add(group(2))
    await settle()
    a, b = pod("a", owners=("job",)), pod("b", owners=("job",))
    controller.on_pod_add(a)
    controller.on_pod_add(b)
    await settle()
    assert patches.phases() == ["Pending"]  # the second write waits out the interval
    clock.advance(1.0)
    await settle()
    assert patches.phases() == ["Pending", "Scheduling"]
    assert patches.bodies[-1]["occupiedBy"] == f"{NS}/job"
    assert patches.bodies[-1]["scheduleStartTime"] == rfc3339(clock.wall())
    ra = a.model_copy(update={"status": a.status.model_copy(update={"phase": "Running"})})
    rb = b.model_copy(update={"status": b.status.model_copy(update={"phase": "Running"})})
    controller.on_pod_update(a, ra)
    controller.on_pod_update(b, rb)
    clock.advance(1.0)
    await settle()
    assert patches.phases() == ["Pending", "Scheduling", "Running"]
    assert patches.bodies[-1]["running"] == 2
    sb = rb.model_copy(update={"status": rb.status.model_copy(update={"phase": "Succeeded"})})
    sa = ra.model_copy(update={"status": ra.status.model_copy(update={"phase": "Succeeded"})})
    controller.on_pod_update(rb, sb)
    await settle()
    controller.on_pod_update(ra, sa)
    clock.advance(1.0)
    await settle()
    assert patches.phases() == ["Pending", "Scheduling", "Running", "Finished"]
    assert patches.bodies[-1]["succeeded"] == 2


async def test_a_member_failing_makes_the_group_failed(ctl: Ctl) -> None:
    controller, patches, clock = ctl
    running = [pod("a", "Running"), pod("b", "Running")]
    for p in running:
        controller.on_pod_add(p)
    controller.on_group_add(group(2))
    await settle()
    assert patches.phases() == ["Running"]
    failed = running[0].model_copy(
        update={"status": running[0].status.model_copy(update={"phase": "Failed"})}
    )
    controller.on_pod_update(running[0], failed)
    clock.advance(1.0)
    await settle()
    assert patches.phases() == ["Running", "Failed"]
    assert (patches.bodies[-1]["running"], patches.bodies[-1]["failed"]) == (1, 1)


async def test_the_echo_of_our_write_and_unchanged_status_write_nothing(ctl: Ctl) -> None:
    controller, patches, clock = ctl
    pg = group(2)
    controller.on_group_add(pg)
    await settle()
    echoed = pg.model_copy(
        update={
            "status": CoschedulingPodGroupStatus(phase="Pending"),
            "metadata": pg.metadata.model_copy(update={"resource_version": "1"}),
        }
    )
    controller.on_group_update(pg, echoed)
    controller.on_pod_add(pod("a"))  # still Pending: nothing to write
    clock.advance(5.0)
    await settle()
    assert patches.phases() == ["Pending"]
    assert controller.pending == 0


async def test_pods_of_other_groups_and_namespaces_are_not_members(ctl: Ctl) -> None:
    controller, patches, _ = ctl
    controller.on_pod_add(pod("a", "Running", namespace="elsewhere"))
    controller.on_pod_add(pod("b", "Running", group_name="other"))
    controller.on_pod_add(pod("c", "Running"))
    controller.on_group_add(group(1))
    await settle()
    assert patches.bodies[-1]["running"] == 1


async def test_a_pod_relabelled_away_leaves_the_group(ctl: Ctl) -> None:
    controller, patches, clock = ctl
    a = pod("a", "Running")
    controller.on_pod_add(a)
    controller.on_group_add(group(1))
    await settle()
    assert patches.phases() == ["Running"]
    controller.on_pod_update(a, pod("a", "Running", group_name="other"))
    clock.advance(1.0)
    await settle()
    assert patches.phases() == ["Running", "Pending"]


async def test_a_failed_write_is_retried_after_a_backoff(ctl: Ctl) -> None:
    controller, patches, clock = ctl
    patches.failures = [ApiError(500, "boom"), ApiError(503, "busy")]
    controller.on_group_add(group(2))
    await settle()
    assert (len(patches.paths), patches.bodies) == (1, [])
    clock.advance(1.0)
    await settle()
    assert (len(patches.paths), patches.bodies) == (2, [])
    clock.advance(1.0)  # the second failure doubled the wait
    await settle()
    assert len(patches.paths) == 2
    clock.advance(1.0)
    await settle()
    assert patches.phases() == ["Pending"]
    assert controller.write_failures == 2


async def test_a_group_deleted_before_its_write_is_not_written(ctl: Ctl) -> None:
    controller, patches, clock = ctl
    pg = group(1)
    controller.on_group_add(pg)
    await settle()
    controller.on_pod_add(pod("a", "Running"))
    controller.on_group_delete(pg)
    clock.advance(1.0)
    await settle()
    assert patches.phases() == ["Pending"]
    assert controller.pending == 0


async def test_a_not_found_write_is_not_retried(ctl: Ctl) -> None:
    controller, patches, clock = ctl
    patches.failures = [ApiError(404, "gone")]
    controller.on_group_add(group(1))
    await settle()
    clock.advance(10.0)
    await settle()
    assert len(patches.paths) == 1
    assert controller.pending == 0


async def test_pods_before_their_group_are_counted_when_it_appears(ctl: Ctl) -> None:
    controller, patches, _ = ctl
    controller.on_pod_add(pod("a", "Succeeded"))
    await settle()
    assert patches.paths == []
    controller.on_group_add(group(1))
    await settle()
    assert patches.phases() == ["Finished"]
    assert controller.desired(NS, "pg") == CoschedulingPodGroupStatus(
        phase="Finished", succeeded=1, schedule_start_time=rfc3339(NOW)
    )
    assert controller.desired(NS, "nope") is None


async def test_nothing_is_written_before_the_informers_have_synced() -> None:
    clock = FakeClock(start=100.0)
    patches = Patches()
    synced = False
    controller = PodGroupStatusController(patches, clock, synced=lambda: synced)
    try:
        controller.on_group_add(group(1, phase="Running", running=1, scheduleStartTime=EARLIER))
        clock.advance(5.0)
        await settle()
        assert patches.paths == []  # the pods are not listed yet: no Pending regression
        controller.on_pod_add(pod("a", "Running"))
        synced = True
        clock.advance(1.0)
        await settle()
        assert patches.paths == [] and controller.pending == 0  # already correct
    finally:
        await controller.close()


# --- PodGroupScheduled ---------------------------------------------------------------------


def cond(
    status: str, reason: str, message: str = "", at: str = EARLIER, kind: str = "PodGroupScheduled"
) -> Condition:
    return Condition(
        type=kind, status=status, reason=reason, message=message, last_transition_time=at
    )


DISRUPTION = cond("True", "PreemptionByScheduler", kind="DisruptionTarget")

CONDITIONS = [
    pytest.param(
        [], "Scheduled", "", [cond("True", "Scheduled", at=START)], id="a first success is True now"
    ),
    pytest.param(
        [],
        "Unschedulable",
        "0/3 nodes",
        [cond("False", "Unschedulable", "0/3 nodes", at=START)],
        id="a first failure is False now",
    ),
    pytest.param(
        [cond("False", "Unschedulable", "0/3 nodes")],
        "Unschedulable",
        "0/4 nodes",
        [cond("False", "Unschedulable", "0/4 nodes")],
        id="a new message keeps the transition time",
    ),
    pytest.param(
        [cond("False", "Unschedulable")],
        "SchedulerError",
        "boom",
        [cond("False", "SchedulerError", "boom")],
        id="a new reason with the same status keeps the transition time",
    ),
    pytest.param(
        [cond("False", "Unschedulable")],
        "Scheduled",
        "",
        [cond("True", "Scheduled", at=START)],
        id="success after failure turns True now",
    ),
    pytest.param(
        [cond("True", "Scheduled")],
        "Unschedulable",
        "0/3 nodes",
        [cond("True", "Scheduled")],
        id="True never regresses to Unschedulable",
    ),
    pytest.param(
        [cond("True", "Scheduled")],
        "SchedulerError",
        "boom",
        [cond("True", "Scheduled")],
        id="True never regresses to SchedulerError",
    ),
    pytest.param(
        [DISRUPTION, cond("False", "Unschedulable")],
        "Scheduled",
        "",
        [DISRUPTION, cond("True", "Scheduled", at=START)],
        id="other conditions are kept in place",
    ),
    pytest.param(
        [DISRUPTION],
        "Unschedulable",
        "x",
        [DISRUPTION, cond("False", "Unschedulable", "x", at=START)],
        id="the condition is appended after the others",
    ),
]


@pytest.mark.parametrize(("previous", "outcome", "message", "expected"), CONDITIONS)
def test_pod_group_scheduled_condition(
    previous: list[Condition], outcome: Any, message: str, expected: list[Condition]
) -> None:
    assert pod_group_scheduled_condition(previous, outcome, message, NOW) == expected


def test_conditions_patch_carries_every_condition_in_api_form() -> None:
    assert conditions_patch([DISRUPTION]) == {
        "status": {
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "PreemptionByScheduler",
                    "message": "",
                    "lastTransitionTime": EARLIER,
                }
            ]
        }
    }
