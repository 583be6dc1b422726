"""``leader_election_master_status{name}``: 0 standing by, 1 leading, 0 again once
leadership ends (lost or stopped), read from a real ``SchedulerMetrics`` registry."""

from __future__ import annotations

import random

from prometheus_client import CollectorRegistry
from troupe.api.clock import FakeClock
from troupe.kube.leader import LeaderElector, Outcome
from troupe.scheduler.observe.metrics import SchedulerMetrics

from tests.kube.leader.fakes import LeaseStore, StoreClient
from tests.kube.leader.test_elector import LEASE, RENEW, RETRY, Run, advance


def status(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("leader_election_master_status", {"name": "troupe"})


def elector(store: LeaseStore, clock: FakeClock, metrics: SchedulerMetrics) -> LeaderElector:
    return LeaderElector(
        StoreClient(store),
        clock,
        namespace="kube-system",
        name="troupe",
        identity="me",
        lease_duration=LEASE,
        renew_deadline=RENEW,
        retry_period=RETRY,
        rng=random.Random(7),
        metrics=metrics,
    )


async def test_the_status_follows_leadership_through_a_loss() -> None:
    store, clock = LeaseStore(), FakeClock()
    metrics = SchedulerMetrics(CollectorRegistry())
    store.held_by("other")
    run = Run(elector(store, clock, metrics))
    await advance(clock, 1)
    assert status(metrics.registry) == 0, "a standby exports 0"
    await advance(clock, LEASE + RETRY * 2.2 + 0.5)
    assert run.e.is_leader
    assert status(metrics.registry) == 1
    store.held_by("other")
    await advance(clock, RETRY + 0.5)
    assert await run.outcome() is Outcome.LOST
    assert status(metrics.registry) == 0


async def test_the_status_is_0_after_a_clean_stop() -> None:
    store, clock = LeaseStore(), FakeClock()
    metrics = SchedulerMetrics(CollectorRegistry())
    run = Run(elector(store, clock, metrics))
    await advance(clock, 0.5)
    assert status(metrics.registry) == 1
    run.e.stop()
    assert await run.outcome() is Outcome.STOPPED
    assert status(metrics.registry) == 0
