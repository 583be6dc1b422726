"""Doubles and builders for the Coscheduling plugin tests: a fake GroupDirectory
(policies, placed counts, the members that exist), fake waiting pods that record what
the plugin allowed or rejected, and a FakeClock for the backoff and the permitted-group
cache."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from troupe.api.clock import FakeClock
from troupe.api.gangs import POD_GROUP_LABEL, GangPolicy, GroupKey, GroupProblem, GroupRef
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Node
from troupe.api.podinfo import PodInfo
from troupe.plugins.coscheduling import (
    Coscheduling,
    CoschedulingArgs,
)

from tests.plugins.builders import make_node, make_pod

PG = GroupKey("default/pg")
OTHER = GroupKey("default/other")
GPU = "nvidia.com/gpu"


# --- doubles -------------------------------------------------------------------------


@dataclass
class Directory:
    """GroupDirectory without sibling counts (the bare troupe.api contract)."""

    policies: dict[str, GangPolicy] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    placed: dict[str, int] = field(default_factory=dict)

    def policy(self, ref: GroupRef) -> GangPolicy | None:
        return self.policies.get(ref.key)

    def problem(self, ref: GroupRef) -> GroupProblem | None:
        message = self.problems.get(ref.key)
        return GroupProblem(ref, "spec.minMember", message) if message else None

    def placed_count(self, key: GroupKey) -> int:
        return self.placed.get(key, 0)


@dataclass
class CountingDirectory(Directory):
    """GroupDirectory that also knows which pods exist for each group."""

    members: dict[str, set[str]] = field(default_factory=dict)

    def member_keys(self, key: GroupKey) -> Collection[str]:
        return self.members.get(key, set())


@dataclass
class Waiting:
    pod: PodInfo
    allowed: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)

    def allow(self, plugin: str) -> None:
        self.allowed.append(plugin)

    def reject(self, plugin: str, message: str) -> None:
        self.rejected.append((plugin, message))


class GangHandle:
    def __init__(self, groups: Directory, table: NodeTable | None = None) -> None:
        self.groups = groups
        self.table = table if table is not None else NodeTable()
        self.clock = FakeClock()
        self.client = None
        self.scheduler_name = "troupe-scheduler"
        self.waiting: list[Waiting] = []

    def get_waiting_pod(self, key: str) -> Waiting | None:
        return next((w for w in self.waiting if w.pod.key == key), None)

    def iterate_waiting_pods(self) -> Sequence[Waiting]:
        return list(self.waiting)


def gang(min_count: int, **fields: object) -> GangPolicy:
    return GangPolicy(gang=True, min_count=min_count, **fields)  # type: ignore[arg-type]


def member(name: str, group: str = "pg", cpu: str | None = None) -> PodInfo:
    return make_pod().name(name).label(POD_GROUP_LABEL, group).req(cpu=cpu).info()


def loner(name: str = "solo") -> PodInfo:
    return make_pod().name(name).info()


def running(name: str, cpu: str) -> PodInfo:
    return make_pod().name(name).req(cpu=cpu).info()


def keys(count: int, group: str = "pg") -> set[str]:
    return {f"default/{group}-{i}" for i in range(count)}


def node(name: str, cpu: str = "4", pods: int = 110) -> Node:
    return make_node().name(name).capacity(cpu=cpu, memory="8Gi", pods=pods).obj()


def plugin_for(
    groups: Directory, table: NodeTable | None = None, **args: int
) -> tuple[Coscheduling, GangHandle]:
    handle = GangHandle(groups, table)
    model = CoschedulingArgs.model_validate(args) if args else None
    return Coscheduling(model, handle), handle
