"""LeaderElector on a FakeClock and an in-memory Lease store (client-go semantics)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from troupe.api.clock import FakeClock
from troupe.kube.leader import LeaderElector, Outcome

from tests.kube.leader.fakes import LeaseStore, StoreClient

LEASE, RENEW, RETRY = 15.0, 10.0, 2.0


def elector(client: StoreClient, clock: FakeClock, identity: str = "me") -> LeaderElector:
    return LeaderElector(
        client,
        clock,
        namespace="kube-system",
        name="troupe",
        identity=identity,
        lease_duration=LEASE,
        renew_deadline=RENEW,
        retry_period=RETRY,
        rng=random.Random(7),
    )


async def settle() -> None:
    for _ in range(40):
        await asyncio.sleep(0)


async def advance(clock: FakeClock, seconds: float, step: float = 0.25) -> None:
    """Move time in small steps, letting every woken loop run, as real time would."""
    await settle()
    while seconds > 1e-9:
        clock.advance(min(step, seconds))
        seconds -= step
        await settle()


# --- one attempt ------------------------------------------------------------------

Scenario = Callable[[LeaderElector, LeaseStore, FakeClock], Awaitable[bool]]


async def absent(e: LeaderElector, store: LeaseStore, clock: FakeClock) -> bool:
    return await e.try_acquire_or_renew()


async def released(e: LeaderElector, store: LeaseStore, clock: FakeClock) -> bool:
    store.held_by("", duration=1, transitions=3)
    return await e.try_acquire_or_renew()


async def live_holder(e: LeaderElector, store: LeaseStore, clock: FakeClock) -> bool:
    store.held_by("other")
    assert not await e.try_acquire_or_renew()
    clock.advance(LEASE - 0.5)
    return await e.try_acquire_or_renew()


async def expired_holder(e: LeaderElector, store: LeaseStore, clock: FakeClock) -> bool:
    store.held_by("other", transitions=2)
    assert not await e.try_acquire_or_renew()
    clock.advance(LEASE + 0.5)
    return await e.try_acquire_or_renew()


async def renewing_holder(e: LeaderElector, store: LeaseStore, clock: FakeClock) -> bool:
    store.held_by("other")
    assert not await e.try_acquire_or_renew()
    clock.advance(10)
    store.held_by("other")  # renewed: observed anew on our clock
    assert not await e.try_acquire_or_renew()
    clock.advance(10)
    return await e.try_acquire_or_renew()


async def racing_writer(e: LeaderElector, store: LeaseStore, clock: FakeClock) -> bool:
    store.held_by("other")
    assert not await e.try_acquire_or_renew()
    clock.advance(LEASE + 0.5)
    store.before_write = lambda: store.held_by("other")  # renews just before our PUT
    return await e.try_acquire_or_renew()


async def racing_creator(e: LeaderElector, store: LeaseStore, clock: FakeClock) -> bool:
    store.before_write = lambda: store.held_by("other")  # creates it just before our POST
    return await e.try_acquire_or_renew()


@pytest.mark.parametrize(
    ("scenario", "acquired", "holder", "transitions"),
    [
        pytest.param(absent, True, "me", 0, id="an absent lease is created and held"),
        pytest.param(released, True, "me", 4, id="a released lease is taken, one more transition"),
        pytest.param(live_holder, False, "other", 0, id="a live holder is respected"),
        pytest.param(
            expired_holder, True, "me", 3, id="a holder silent for a lease duration is replaced"
        ),
        pytest.param(
            renewing_holder, False, "other", 0, id="expiry counts from when we saw the renewal"
        ),
        pytest.param(racing_writer, False, "other", 0, id="a stale resourceVersion (409) loses"),
        pytest.param(racing_creator, False, "other", 0, id="a racing create (409) loses"),
    ],
)
async def test_one_attempt(
    scenario: Scenario, acquired: bool, holder: str, transitions: int
) -> None:
    store, clock = LeaseStore(), FakeClock()
    e = elector(StoreClient(store), clock)
    assert await scenario(e, store, clock) is acquired
    spec = store.spec()
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == (holder, transitions)
    if acquired:
        assert spec["leaseDurationSeconds"] == 15
        assert spec["acquireTime"] == spec["renewTime"]


async def test_a_renewal_keeps_acquire_time_and_transitions_and_moves_renew_time() -> None:
    store, clock = LeaseStore(), FakeClock()
    e = elector(StoreClient(store), clock)
    assert await e.try_acquire_or_renew()
    first = store.spec()
    clock.advance(2)
    assert await e.try_acquire_or_renew()
    second = store.spec()
    assert second["acquireTime"] == first["acquireTime"]
    assert second["leaseTransitions"] == first["leaseTransitions"]
    assert second["renewTime"] > first["renewTime"]


@pytest.mark.parametrize(
    ("foreign_holder", "renewed"),
    [
        pytest.param("me", True, id="a foreign write keeping us holder: re-read and renew"),
        pytest.param("other", False, id="a foreign write naming another holder: re-read, lose"),
    ],
)
async def test_a_conflicting_renewal_rereads_the_lease(foreign_holder: str, renewed: bool) -> None:
    store, clock = LeaseStore(), FakeClock()
    client = StoreClient(store)
    e = elector(client, clock)
    assert await e.try_acquire_or_renew()
    store.held_by(foreign_holder)  # our cached resourceVersion is now stale
    clock.advance(2)
    assert await e.try_acquire_or_renew() is renewed
    assert store.spec()["holderIdentity"] == foreign_holder


# --- the loops ----------------------------------------------------------------------


class Run:
    """``elector.run`` as a task, recording the callbacks."""

    def __init__(self, e: LeaderElector, *, fail: Exception | None = None) -> None:
        self.e = e
        self.started = 0
        self.stopped = 0
        self.holder_when_stopped: str | None = None
        self.fail = fail
        self.task = asyncio.ensure_future(e.run(self._lead, self._stopped))

    async def _lead(self) -> None:
        self.started += 1
        if self.fail is not None:
            raise self.fail
        await asyncio.Event().wait()

    async def _stopped(self) -> None:
        self.stopped += 1
        client = self.e.client
        assert isinstance(client, StoreClient)
        self.holder_when_stopped = client.store.spec().get("holderIdentity")

    async def outcome(self) -> Outcome:
        return await asyncio.wait_for(self.task, 1)


async def test_a_standby_leads_once_the_holders_lease_expires() -> None:
    store, clock = LeaseStore(), FakeClock()
    store.held_by("other")
    run = Run(elector(StoreClient(store), clock))
    await advance(clock, LEASE - 1)
    assert (run.e.is_leader, run.started, run.e.state) == (False, 0, "standing by")
    assert run.e.healthy
    await advance(clock, 1 + RETRY * 2.2 + 0.5)
    assert (run.e.is_leader, run.started, run.e.state) == (True, 1, "leading")
    run.e.stop()
    assert await run.outcome() is Outcome.STOPPED


async def test_a_leader_renews_every_retry_period() -> None:
    store, clock = LeaseStore(), FakeClock()
    run = Run(elector(StoreClient(store), clock))
    await advance(clock, 0.5)
    before = len(store.writes)
    await advance(clock, 10 * RETRY)
    assert 9 <= len(store.writes) - before <= 11
    assert run.e.healthy
    run.e.stop()
    await run.outcome()


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param("down", id="an API that refuses every request"),
        pytest.param("hang", id="an API that never answers"),
    ],
)
async def test_a_leader_that_cannot_renew_within_the_deadline_stops_leading(fault: str) -> None:
    store, clock = LeaseStore(), FakeClock()
    client = StoreClient(store)
    run = Run(elector(client, clock))
    await advance(clock, 0.5)
    assert run.e.is_leader
    setattr(client, fault, True)
    # The last renewal that succeeded was sent at 0 (the acquisition).
    await advance(clock, RENEW - 1)
    assert run.e.is_leader, "not before renewDeadline after the last renewal sent"
    await advance(clock, RETRY + 1)
    assert (run.e.is_leader, run.stopped) == (False, 1)
    await advance(clock, RETRY)  # the release attempt is bounded too
    assert run.task.done() and run.task.result() is Outcome.LOST
    assert not run.e.healthy
    assert store.spec()["holderIdentity"] == "me", "unreachable, so not released"


async def test_a_leader_that_sees_another_holder_stops_at_its_next_renewal() -> None:
    store, clock = LeaseStore(), FakeClock()
    run = Run(elector(StoreClient(store), clock))
    await advance(clock, 0.5)
    store.held_by("other")
    await advance(clock, RETRY + 0.5)
    assert run.task.done() and run.task.result() is Outcome.LOST
    assert store.spec()["holderIdentity"] == "other", "a 409 keeps the release from clobbering it"


async def test_stop_stops_leading_first_then_releases_the_lease() -> None:
    store, clock = LeaseStore(), FakeClock()
    run = Run(elector(StoreClient(store), clock))
    await advance(clock, 0.5)
    run.e.stop()
    assert await run.outcome() is Outcome.STOPPED
    assert run.holder_when_stopped == "me"
    spec = store.spec()
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)
    assert not run.e.healthy


async def test_stop_while_standing_by_leaves_the_lease_alone() -> None:
    store, clock = LeaseStore(), FakeClock()
    store.held_by("other")
    run = Run(elector(StoreClient(store), clock))
    await advance(clock, 1)
    writes = len(store.writes)
    run.e.stop()
    assert await run.outcome() is Outcome.STOPPED
    assert (len(store.writes), run.started, run.stopped) == (writes, 0, 0)


async def test_a_failing_leader_callback_ends_leadership_releases_and_reraises() -> None:
    store, clock = LeaseStore(), FakeClock()
    run = Run(elector(StoreClient(store), clock), fail=RuntimeError("caches never synced"))
    await advance(clock, 0.5)
    with pytest.raises(RuntimeError, match="caches never synced"):
        await run.outcome()
    assert run.stopped == 1
    assert store.spec()["holderIdentity"] == ""


async def test_a_released_lease_is_taken_by_the_standby_without_waiting_a_lease_duration() -> None:
    store, clock = LeaseStore(), FakeClock()
    leader = Run(elector(StoreClient(store), clock, "a"))
    await advance(clock, 0.5)
    standby = Run(elector(StoreClient(store), clock, "b"))
    await advance(clock, 1)
    leader.e.stop()
    await leader.outcome()
    await advance(clock, RETRY * 2.2 + 0.5)
    assert standby.e.is_leader
    assert store.spec()["leaseTransitions"] == 1
    standby.e.stop()
    await standby.outcome()


# --- the invariant ------------------------------------------------------------------

Step = tuple[int, str, float]
steps = st.lists(
    st.tuples(
        st.integers(0, 1),
        st.sampled_from(["down", "up", "hang", "unhang", "wait"]),
        st.floats(0.1, 6.0),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(steps)
@example([(0, "down", 6.0), (1, "wait", 6.0), (1, "wait", 6.0), (0, "up", 6.0)])
@example([(0, "hang", 6.0), (1, "wait", 6.0), (1, "wait", 6.0), (0, "unhang", 6.0)])
def test_two_replicas_never_both_lead(plan: list[Step]) -> None:
    """Whatever fails when, while time moves no faster than the loops run, at most one
    replica believes it leads (renewDeadline + retryPeriod < leaseDuration)."""

    async def scenario() -> None:
        store, clock = LeaseStore(), FakeClock()
        clients = [StoreClient(store), StoreClient(store)]
        runs = [Run(elector(c, clock, f"r{i}-0")) for i, c in enumerate(clients)]
        restarts = [0, 0]
        for who, action, seconds in plan:
            client = clients[who]
            if action in ("down", "hang"):
                setattr(client, action, True)
            elif action == "up":
                client.down = False
            elif action == "unhang":
                client.hang = False
            remaining = seconds
            while remaining > 0:
                clock.advance(min(0.25, remaining))
                remaining -= 0.25
                await settle()
                assert sum(r.e.is_leader for r in runs) <= 1
                for i, r in enumerate(runs):
                    if r.task.done():  # exited: the pod restarts with a new identity
                        restarts[i] += 1
                        runs[i] = Run(elector(clients[i], clock, f"r{i}-{restarts[i]}"))
        for r in runs:
            r.e.stop()
        for _ in range(200):  # a release to a hung API is abandoned on our clock
            if all(r.task.done() for r in runs):
                break
            clock.advance(0.25)
            await settle()
        assert all(r.task.done() for r in runs)

    asyncio.run(scenario())
