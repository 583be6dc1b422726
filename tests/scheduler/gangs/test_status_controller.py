"""The PodGroup status controller: writes coalesced per group, at most one a second,
retried with backoff, nothing before the informers have synced."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from troupe.api.client import ApiError, WriteFenced
from troupe.api.clock import FakeClock
from troupe.api.gangapi import CoschedulingPodGroupStatus
from troupe.api.objects import SchedulingGroup
from troupe.api.tasks import TaskSupervisor
from troupe.kube.client import rfc3339
from troupe.scheduler.gangs import PodGroupStatusController

from tests.scheduler.gangs.status_builders import EARLIER, NOW, NS, group, pod

# --- the controller -------------------------------------------------------------------------


class Patches:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.failures: list[Exception] = []

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


async def test_a_write_fenced_at_the_lease_is_dropped_without_a_task_failure() -> None:
    # The replica is losing its lease; it stops at once and the next leader writes
    # the status from the members.
    clock, patches, tasks = FakeClock(start=100.0), Patches(), TaskSupervisor("status")
    controller = PodGroupStatusController(patches, clock, supervisor=tasks, min_interval=1.0)
    patches.failures = [WriteFenced("not sent: this replica does not hold the lease")]
    controller.on_group_add(group(2))
    await settle()
    clock.advance(60.0)
    await settle()
    assert (tasks.failures, controller.write_failures, len(patches.paths)) == (0, 1, 1)
    await controller.close()


# --- only our groups ------------------------------------------------------------------------


def scheduled_by(p: Any, scheduler: str) -> Any:
    return p.model_copy(update={"spec": p.spec.model_copy(update={"scheduler_name": scheduler})})


async def test_a_group_whose_pods_all_name_another_scheduler_is_left_alone() -> None:
    clock = FakeClock(start=100.0)
    patches = Patches()
    controller = PodGroupStatusController(
        patches, clock, min_interval=1.0, ours=lambda name: name == "troupe-scheduler"
    )
    try:
        controller.on_group_add(group(2))
        for name in ("a", "b"):
            controller.on_pod_add(scheduled_by(pod(name), "default-scheduler"))
        await settle()
        clock.advance(5.0)
        await settle()
        assert patches.bodies == []
        # One member of ours makes it our group to report.
        controller.on_pod_add(scheduled_by(pod("c"), "troupe-scheduler"))
        clock.advance(1.0)
        await settle()
        assert patches.phases() == ["Scheduling"]
    finally:
        await controller.close()


async def test_a_pod_that_joins_a_native_group_is_not_counted_by_its_label(ctl: Ctl) -> None:
    controller, patches, clock = ctl
    controller.on_group_add(group(1))
    both = pod("both", "Running")
    both = both.model_copy(
        update={
            "spec": both.spec.model_copy(
                update={"scheduling_group": SchedulingGroup(pod_group_name="native")}
            )
        }
    )
    controller.on_pod_add(both)
    clock.advance(1.0)
    await settle()
    assert patches.bodies == [{"phase": "Pending", "running": 0, "succeeded": 0, "failed": 0}]
