"""Gang components built from their collaborators alone, without a Scheduler.

Each part of the group cycle takes only what it uses, so it can be tried on a
cache, a directory and a framework: the placement of a gang, its dry run for
preemption, and what the reporter writes.
"""

from __future__ import annotations

from typing import Any

from troupe.api.clock import FakeClock
from troupe.api.config import config_document, load_config
from troupe.api.gangs import GangApi, group_ref_of
from troupe.api.podinfo import PodInfo
from troupe.api.tasks import TaskSupervisor
from troupe.plugins.registry import catalog, default_registry
from troupe.queue.entity import QueuedGroupInfo
from troupe.scheduler.cache import Cache
from troupe.scheduler.cycle.algorithm import PodAlgorithm
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.framework.waiting_pods import WaitingPods
from troupe.scheduler.gangs.attempt import GroupAttempt
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.gangs.placement import GangPlacer
from troupe.scheduler.gangs.report import GangReporter
from troupe.scheduler.gangs.topology import TopologyPlacer

from tests.plugins.builders import make_node
from tests.scheduler.fakes import Recorder
from tests.scheduler.gang_helpers import coscheduling_group, member


class NoPreemptions:
    def in_flight(self, preemptor: PodInfo) -> bool:
        return False

    def attempted(self) -> None:
        return None


class NoNominations:
    def nominated_node(self, key: str) -> str | None:
        return None

    def delete_nominated(self, key: str) -> None:
        return None


class Ended:
    def __init__(self) -> None:
        self.forgotten: list[str] = []

    def forget_member(self, key: str) -> None:
        self.forgotten.append(key)


class Parts:
    """A cache with ``nodes`` nodes of one CPU, a directory, a framework and the
    per-pod algorithm: all a GangPlacer needs."""

    def __init__(self, nodes: int) -> None:
        clock = FakeClock()
        registry = default_registry()
        profile = load_config(config_document(), catalog(registry)).profiles[0]
        self.groups = GangDirectory()
        self.cache = Cache(clock, assumed_ttl=30, listener=self.groups)
        for i in range(nodes):
            self.cache.add_node(
                make_node().name(f"n{i}").capacity(cpu="1", memory="8Gi", pods=110).obj()
            )
        self.fwk = Framework(
            profile,
            registry,
            client=Recorder(),
            clock=clock,
            table=self.cache.table,
            waiting=WaitingPods(clock, TaskSupervisor("test")),
            groups=self.groups,
        )
        self.ended = Ended()
        self.algorithm = PodAlgorithm(
            self.cache,
            percentage_of_nodes_to_score=0,
            preemptions=NoPreemptions(),  # type: ignore[arg-type]
            nominations=NoNominations(),
            ended=self.ended,
        )
        self.placer = GangPlacer(self.algorithm, self.groups)
        self.topology = TopologyPlacer(self.placer, self.groups)

    def gang(self, name: str, min_member: int, size: int) -> list[PodInfo]:
        self.groups.upsert(GangApi.COSCHEDULING, coscheduling_group(name, min_member))
        return [PodInfo.of(member(name, i)) for i in range(size)]

    def attempt(self, members: list[PodInfo], already: int = 0) -> GroupAttempt:
        """An attempt of the group of ``members`` placing all of them."""
        ref = group_ref_of(members[0].pod)
        assert ref is not None
        policy = self.groups.policy(ref)
        assert policy is not None
        entity = QueuedGroupInfo(
            key=ref.key, priority=0, timestamp=0.0, ref=ref, members={m.key: m for m in members}
        )
        return GroupAttempt(self.fwk, entity, policy, tuple(members), already, cycle=0, start=0.0)

    def requested_cpu(self) -> int:
        return int(self.cache.table.requested[self.cache.table.resource_row("cpu")].sum())


def test_a_gang_is_placed_member_by_member_until_the_nodes_run_out() -> None:
    parts = Parts(nodes=2)
    members = parts.gang("train", 3, 3)
    placed, failures, shortfall = parts.placer.place(parts.attempt(members))
    assert shortfall == ""
    assert sorted(p.result.node for p in placed) == ["n0", "n1"]
    assert [info.key for info, _, _ in failures] == [members[2].key]
    assert parts.requested_cpu() == 2000  # placed members stay assumed for the caller
    parts.placer.revert(parts.fwk, placed)
    assert parts.requested_cpu() == 0
    assert sorted(parts.ended.forgotten) == sorted(p.info.key for p in placed)


def test_the_preemption_dry_run_reports_no_quorum_and_leaves_the_table_as_it_was() -> None:
    parts = Parts(nodes=2)
    members = parts.gang("train", 3, 3)
    attempt = parts.attempt(members)
    assert parts.topology.place_quorum(attempt) == (None, 2)
    assert parts.requested_cpu() == 0
    # With one member already bound elsewhere the two others reach the quorum.
    where, placed = parts.topology.place_quorum(attempt.with_members(tuple(members[:2]), 1))
    assert where is not None and sorted(where.values()) == ["n0", "n1"]
    assert placed == 2
    assert parts.requested_cpu() == 0


class Writes:
    def __init__(self) -> None:
        self.statuses: list[tuple[str, str]] = []
        self.events: list[tuple[str, str]] = []

    def pod_status(self, pod: Any, condition: Any, nominated: str | None) -> None:
        self.statuses.append((pod.key, condition.reason))

    def event(self, event: Any) -> None:
        self.events.append((event.regarding.kind, event.reason))


def test_the_reporter_writes_a_member_condition_and_events_through_its_writer() -> None:
    writes = Writes()
    groups = GangDirectory()
    report = GangReporter(writes, groups, FakeClock())  # type: ignore[arg-type]
    pod = PodInfo.of(member("train", 0))
    ref = group_ref_of(pod.pod)
    assert ref is not None
    report.pod(pod, "CoschedulingNotMeetMinMember", "gang default/train: 1 of 2 fit")
    report.group_event(ref, "gang default/train: 1 of 2 fit")
    assert writes.statuses == [("default/train-0", "CoschedulingNotMeetMinMember")]
    assert writes.events == [("Pod", "FailedScheduling"), ("PodGroup", "FailedScheduling")]
