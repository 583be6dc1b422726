"""The scheduler-plugins PodGroup status as a function of its pods: upstream's phase
machine run to its fixed point, counts, ``scheduleStartTime`` and ``occupiedBy``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.objects import Pod
from troupe.scheduler.gangs import coscheduling_status

from tests.scheduler.gangs.status_builders import EARLIER, NOW, START, group, pod, pods

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
