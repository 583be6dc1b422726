"""What a group attempt tells: minResources for late members, the remainder's
messages and events, failures over all members, ``gang <ns>/<name>`` for every API,
Permit rejections, and ``SchedulerError``."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.client import ApiError
from troupe.api.cycle import CycleState
from troupe.api.gangs import GangApi
from troupe.api.nodetable import NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status
from troupe.plugins.registry import PluginSpec, default_registry

from tests.plugins.builders import make_node
from tests.scheduler.gang_helpers import coscheduling_group, member, native_group, workload
from tests.scheduler.harness import Harness


def nodes(n: int, cpu: str = "1", prefix: str = "n") -> list:
    return [
        make_node().name(f"{prefix}{i}").capacity(cpu=cpu, memory="8Gi", pods=110).obj()
        for i in range(n)
    ]


def bound(h: Harness) -> list[str]:
    return sorted(k for k, _ in h.client.bindings)


def group_condition(h: Harness, name: str) -> dict[str, Any]:
    _, patch = [(p, b) for p, b in h.client.patches if f"/podgroups/{name}/" in p][-1]
    (condition,) = patch["status"]["conditions"]
    return dict(condition)


# --- minResources ------------------------------------------------------------------------


async def test_min_resources_counts_what_the_gang_holds_and_late_members_are_placed() -> None:
    h = Harness().nodes(nodes(2))
    group = coscheduling_group("mr", 2, minResources={"cpu": "2"})
    h.handlers.on_group_add(GangApi.COSCHEDULING, group)
    h.pods(member("mr", i) for i in range(3))
    await h.settle()
    assert bound(h) == ["default/mr-0", "default/mr-1"]
    # The third member: the gang's quorum is placed, only it waits for room.
    late = h.client.conditions["default/mr-2"]
    assert late.reason == "Unschedulable"
    assert late.message.startswith("gang default/mr: 2 of 2 required pods placed; 0/2 nodes")
    assert "minResources" not in late.message
    h.handlers.on_node_add(nodes(1, prefix="late")[0])
    await h.advance(20)
    await h.settle()
    assert bound(h) == ["default/mr-0", "default/mr-1", "default/mr-2"]
    await h.close()


async def test_min_resources_still_holds_back_a_gang_below_quorum() -> None:
    h = Harness().nodes(nodes(3))
    h.handlers.on_group_add(
        GangApi.COSCHEDULING, coscheduling_group("mr", 2, minResources={"cpu": "4"})
    )
    h.pods(member("mr", i) for i in range(2))
    await h.settle()
    assert bound(h) == []
    message = h.client.conditions["default/mr-0"].message
    assert message == (
        "gang default/mr: 0 of 2 required pods fit; the cluster does not have the group's "
        "minResources free: Insufficient cpu"
    )
    await h.close()


# --- members beyond the quorum that do not fit ----------------------------------------------


async def test_the_remainder_gets_the_gang_message_and_an_event_and_the_group_stays_true() -> None:
    h = Harness().nodes(nodes(3))
    h.handlers.on_group_add(GangApi.POD_GROUP, native_group("pg", 2))
    h.pods(member("pg", i, api="podgroup") for i in range(4))
    await h.settle()
    assert len(bound(h)) == 3
    (late,) = [
        k
        for k in ("default/pg-0", "default/pg-1", "default/pg-2", "default/pg-3")
        if k not in bound(h)
    ]
    condition = h.client.conditions[late]
    expected = "gang default/pg: 3 of 2 required pods placed; 0/3 nodes are available: "
    assert condition.reason == "Unschedulable" and condition.message.startswith(expected)
    assert [e.note for e in h.client.events_for(late, "FailedScheduling")] == [condition.message]
    scheduled = group_condition(h, "pg")
    assert (scheduled["status"], scheduled["reason"]) == ("True", "Scheduled")
    assert scheduled["message"] == "gang default/pg: 3 of 2 required pods placed"
    # A retry of the late member alone that places nothing: not a "scheduled" attempt,
    # and the group condition is left as it was.
    patches = len(h.client.patches)
    await h.advance(20)
    h.scheduler.queue.move_all_to_active_or_backoff()
    await h.advance(20)
    await h.settle()
    assert h.scheduler.stats.group_results.get("scheduled") == 1
    assert [b for p, b in h.client.patches[patches:] if "/podgroups/pg/" in p] == []
    await h.close()


# --- event text ------------------------------------------------------------------------------


async def test_the_message_counts_the_failures_of_every_member_that_did_not_fit() -> None:
    h = Harness().nodes(nodes(2))
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("mix", 4))
    h.pods([member("mix", 0), member("mix", 1), member("mix", 2, cpu="8")])
    h.pods([member("mix", 3, nodeSelector={"disk": "ssd"})])
    await h.settle()
    message = h.client.conditions["default/mix-0"].message
    assert message.startswith("gang default/mix: 2 of 4 required pods fit; ")
    assert "1 pod(s): 0/2 nodes are available: 2 Insufficient cpu." in message
    assert "1 pod(s): 0/2 nodes are available: 2 node(s) didn't match Pod's node affinity" in (
        message
    )
    await h.close()


@pytest.mark.parametrize(
    ("api", "obj", "prefix"),
    [
        (
            GangApi.WORKLOAD,
            workload("job", {"workers": 3}),
            'gang default/job pod group "workers": ',
        ),
        (GangApi.POD_GROUP, native_group("job", 3), "gang default/job: "),
        (GangApi.COSCHEDULING, coscheduling_group("job", 3), "gang default/job: "),
    ],
    ids=["Workload", "v1alpha2 PodGroup", "scheduler-plugins PodGroup"],
)
async def test_every_api_names_the_gang_by_namespace_and_name(
    api: GangApi, obj: Any, prefix: str
) -> None:
    h = Harness().nodes(nodes(2))
    h.handlers.on_group_add(api, obj)
    kind = {GangApi.WORKLOAD: "workload", GangApi.POD_GROUP: "podgroup"}.get(api, "coscheduling")
    h.pods(member("job", i, api=kind) for i in range(3))
    await h.settle()
    message = h.client.conditions["default/job-0"].message
    assert message.startswith(prefix + "2 of 3 required pods fit; ")
    (event,) = [e for e in h.client.events if e.regarding.name == "job"]
    assert event.note == message
    await h.close()


class RejectingPermit:
    name = "RejectingPermit"

    def __init__(self, args: object, handle: object) -> None:
        pass

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        if pod.key.endswith("-1"):
            return Status.unschedulable("not today", plugin=self.name), 0.0
        return Status(), 0.0


class BrokenFilter:
    name = "BrokenFilter"

    def __init__(self, args: object, handle: object) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> tuple[None, Status]:
        if pod.key.endswith("-1"):
            return None, Status.from_error(RuntimeError("disk on fire"))
        return None, Status()


def harness_with(cls: type, point: str) -> Harness:
    registry = default_registry()
    registry.register(PluginSpec(cls.name, lambda a, h: cls(a, h), None, cls))  # type: ignore[attr-defined]
    config = {"profiles": [{"plugins": {point: {"enabled": [{"name": cls.name}]}}}]}  # type: ignore[attr-defined]
    return Harness(config, registry=registry)


async def test_a_permit_rejection_says_how_many_fit() -> None:
    h = harness_with(RejectingPermit, "permit").nodes(nodes(3))
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("p", 3))
    h.pods(member("p", i) for i in range(3))
    await h.settle()
    assert bound(h) == []
    assert h.scheduler.cache.assumed_count == 0
    message = h.client.conditions["default/p-0"].message
    assert message == (
        "gang default/p: 3 of 3 required pods fit; default/p-1 rejected at Permit: not today"
    )
    await h.close()


async def test_a_plugin_error_is_a_scheduler_error_for_the_group_and_the_pod() -> None:
    h = harness_with(BrokenFilter, "preFilter").nodes(nodes(3))
    h.handlers.on_group_add(GangApi.POD_GROUP, native_group("e", 3))
    # e-1 differs from its siblings, so it is not placed in their batch.
    h.pods(member("e", i, api="podgroup", cpu="500m" if i == 1 else "1") for i in range(3))
    await h.settle()
    assert bound(h) == []
    assert h.client.conditions["default/e-1"].reason == "SchedulerError"
    assert h.client.conditions["default/e-0"].reason == "CoschedulingNotMeetMinMember"
    scheduled = group_condition(h, "e")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "SchedulerError")
    assert "disk on fire" in scheduled["message"]
    assert h.scheduler.stats.group_results.get("error") == 1
    await h.close()


async def test_a_binding_api_error_that_breaks_quorum_is_a_scheduler_error() -> None:
    h = Harness().nodes(nodes(3))
    h.client.bind_errors["default/b-1"] = [ApiError(500, "etcd unavailable")]
    h.handlers.on_group_add(GangApi.POD_GROUP, native_group("b", 3))
    h.pods(member("b", i, api="podgroup") for i in range(3))
    await h.settle()
    scheduled = group_condition(h, "b")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "SchedulerError")
    assert "binding default/b-1 failed" in scheduled["message"]
    # The retry binds the rest: True, and never False again.
    await h.advance(20)
    await h.settle()
    assert len(bound(h)) == 3
    scheduled = group_condition(h, "b")
    assert (scheduled["status"], scheduled["reason"]) == ("True", "Scheduled")
    await h.close()
