"""SchedulingGates: gated pods wait at PreEnqueue until their gates are gone."""

from __future__ import annotations

import pytest
from troupe.api.events import Action, QueueingHint, Resource
from troupe.api.status import Code
from troupe.plugins.schedulinggates import SchedulingGates
from troupe.plugins.schedulinggates.scheduling_gates import gates_removed_from_this_pod

from tests.plugins.builders import make_pod
from tests.plugins.fakes import FakeHandle


def test_a_pod_without_gates_is_enqueued() -> None:
    assert SchedulingGates(None, FakeHandle()).pre_enqueue(make_pod().obj()).is_success


def test_a_gated_pod_waits_and_the_message_lists_its_gates() -> None:
    status = SchedulingGates(None, FakeHandle()).pre_enqueue(
        make_pod().scheduling_gates("example.com/quota", "example.com/data").obj()
    )
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == "waiting for scheduling gates: [example.com/quota example.com/data]"
    assert status.plugin == "SchedulingGates"


@pytest.mark.parametrize(
    ("updated_uid", "hint"),
    [
        pytest.param("me", QueueingHint.QUEUE, id="the gated pod's own gates are removed"),
        pytest.param("other", QueueingHint.SKIP, id="another pod's gates are removed"),
    ],
)
def test_gates_eliminated_hint(updated_uid: str, hint: QueueingHint) -> None:
    gated = make_pod().uid("me").scheduling_gates("g").obj()
    updated = make_pod().uid(updated_uid).obj()
    assert gates_removed_from_this_pod(gated, gated, updated) is hint


def test_registers_for_gate_removal_on_unscheduled_pods() -> None:
    (registration,) = SchedulingGates(None, FakeHandle()).events_to_register()
    assert registration.event.resource is Resource.POD
    assert registration.event.action is Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED
