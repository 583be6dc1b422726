"""Builders shared by the DefaultPreemption tests: a wired scheduler, running pods,
PodDisruptionBudgets and candidates."""

from __future__ import annotations

from collections.abc import Iterable

from troupe.api.objects import LabelSelector, ObjectMeta, Pod
from troupe.api.pdb import PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus
from troupe.api.podinfo import PodInfo
from troupe.plugins.defaultpreemption.candidates import Candidate

from tests.plugins.builders import PodBuilder, make_node, make_pod
from tests.scheduler.harness import Harness

SCHEDULER = "troupe-scheduler"


def node(name: str, cpu: str = "4"):
    return make_node().name(name).capacity(cpu=cpu, memory="16Gi", pods=110)


def running(
    name: str, on: str, cpu: str = "1", priority: int = 0, started: str = "2024-01-01T00:00:00Z"
) -> Pod:
    """A pod bound to ``on`` and running since ``started``."""
    pod = make_pod().name(name).req(cpu=cpu).priority(priority).node(on).obj()
    pod.status.phase = "Running"
    pod.status.start_time = started
    return pod


def pending(name: str, cpu: str = "2", priority: int = 100) -> PodBuilder:
    return make_pod().name(name).req(cpu=cpu).priority(priority).scheduler_name(SCHEDULER)


def pdb(
    name: str,
    labels: dict[str, str],
    allowed: int = 0,
    namespace: str = "default",
    **disrupted: str,
) -> PodDisruptionBudget:
    return PodDisruptionBudget(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=PodDisruptionBudgetSpec(selector=LabelSelector(match_labels=labels)),
        status=PodDisruptionBudgetStatus(disruptions_allowed=allowed, disrupted_pods=disrupted),
    )


def harness(nodes: Iterable[str] = ("n1",), cpu: str = "4") -> Harness:
    return Harness().nodes([node(n, cpu).obj() for n in nodes])


def victim(name: str, priority: int = 0, started: str = "2024-01-01T00:00:00Z") -> PodInfo:
    return PodInfo.of(running(name, "n", priority=priority, started=started))


def candidate(node: str, *victims: PodInfo, violations: int = 0) -> Candidate:
    return Candidate(node, tuple(victims), violations)
