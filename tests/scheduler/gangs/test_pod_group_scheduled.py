"""The v1alpha2 PodGroup ``PodGroupScheduled`` condition after an outcome: never True
to False, the transition time moving only with the status."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.gangapi import Condition
from troupe.scheduler.gangs import (
    conditions_patch,
    pod_group_scheduled_condition,
)

from tests.scheduler.gangs.status_builders import EARLIER, NOW, START

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
