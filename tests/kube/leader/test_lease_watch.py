"""A leader watches its Lease and stops writing the moment a version it sees says the
Lease is no longer provably its own: deleted, another holder, a duration that no
longer covers its last renewal, or a spec it cannot read. No clock moves in these
tests between the change and the check: the watch, not the next renewal, stops it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from troupe.api.client import WriteFenced
from troupe.api.clock import FakeClock
from troupe.kube.fence import FencedTransport
from troupe.kube.leader import Outcome
from troupe.kube.transport import Response

from tests.kube.leader.fakes import LeaseStore, StoreClient
from tests.kube.leader.test_elector import LEASE, RENEW, RETRY, Run, advance, elector, settle

BIND = ("POST", "/api/v1/namespaces/default/pods/p/binding")
STATUS = ("PATCH", "/api/v1/namespaces/default/pods/q/status")


class Held:
    """A transport whose requests wait until the test answers them (on the wire)."""

    base_url = "http://api"

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.answer = asyncio.Event()

    async def request(self, method: str, path: str, **_: Any) -> Response:
        self.sent.append((method, path))
        await self.answer.wait()
        return Response(201, b"{}")

    def stream(self, path: str, *, query: Any, timeout: float) -> Any:
        raise NotImplementedError


Change = Callable[[LeaseStore], None]


def deleted(store: LeaseStore) -> None:
    store.delete()


def stolen(store: LeaseStore) -> None:
    store.edit(holderIdentity="other")


def zero_duration(store: LeaseStore) -> None:
    store.edit(leaseDurationSeconds=0)


def shorter_than_since_renewal(store: LeaseStore) -> None:
    store.edit(leaseDurationSeconds=1)  # the last renewal was sent 1.5 s ago


def unparsable_duration(store: LeaseStore) -> None:
    store.edit(leaseDurationSeconds="abc")


def unparsable_holder(store: LeaseStore) -> None:
    store.edit(holderIdentity={"name": "me"})


def unparsable_spec(store: LeaseStore) -> None:
    assert store.lease is not None
    store.put({**store.lease, "spec": ["not", "an", "object"]}, create=False)


CHANGES = [
    pytest.param(deleted, "lease deleted", id="deleted"),
    pytest.param(stolen, "lease taken by another replica", id="another holder"),
    pytest.param(
        zero_duration, "lease duration no longer covers the last renewal", id="zero duration"
    ),
    pytest.param(
        shorter_than_since_renewal,
        "lease duration no longer covers the last renewal",
        id="a duration shorter than the time since the renewal",
    ),
    pytest.param(
        unparsable_duration,
        "lease cannot be read; treated as held by another replica",
        id="leaseDurationSeconds 'abc'",
    ),
    pytest.param(
        unparsable_holder,
        "lease cannot be read; treated as held by another replica",
        id="holderIdentity an object",
    ),
    pytest.param(
        unparsable_spec,
        "lease cannot be read; treated as held by another replica",
        id="spec a list",
    ),
]


async def leading(store: LeaseStore, clock: FakeClock, client: StoreClient | None = None) -> Run:
    run = Run(elector(client or StoreClient(store), clock))
    await advance(clock, 0.5)
    assert run.e.is_leader
    # Renewed at 2 (sent): now 3.5, 1.5 s after the last renewal.
    await advance(clock, RETRY + 1.0)
    assert run.e.may_write()
    return run


@pytest.mark.parametrize(("change", "reason"), CHANGES)
async def test_a_watched_change_stops_writes_at_once_and_ends_leadership(
    change: Change, reason: str
) -> None:
    store, clock = LeaseStore(), FakeClock()
    run = await leading(store, clock)
    held = Held()
    fenced = FencedTransport(held, run.e.fence)
    on_the_wire = asyncio.create_task(fenced.request(*BIND))
    await settle()

    change(store)
    writes_before = len(store.writes)
    await settle()  # the watch delivers it; no clock moved, no renewal ran

    assert not run.e.may_write()
    with pytest.raises(WriteFenced):
        await fenced.request(*STATUS)
    assert held.sent == [BIND], "nothing is sent after the change is seen"
    closure = run.e.fence.closure
    assert closure is not None
    assert (closure.reason, closure.on_the_wire) == (reason, (" ".join(BIND),))
    assert closure.at == clock.now()
    held.answer.set()
    assert (await on_the_wire).status == 201, "a write already on the wire is not called back"
    assert await run.outcome() is Outcome.LOST
    # It stopped without writing its own record over what it saw (no re-creation,
    # no renewal over another holder).
    assert all(w.get("holderIdentity") != "me" for w in store.writes[writes_before:])


async def test_a_shorter_duration_that_still_covers_the_renewal_moves_the_end_in() -> None:
    store, clock = LeaseStore(), FakeClock()
    run = await leading(store, clock)
    store.edit(leaseDurationSeconds=5)  # renewed at 2: others may count from there on
    await settle()
    assert run.e.is_leader and run.e.may_write()
    # The next renewal (sent at 4) writes our own duration over it; the end moves on.
    await advance(clock, 1.0)
    assert store.spec()["leaseDurationSeconds"] == int(LEASE)
    await advance(clock, 3.0)  # 7.5: past 2 + 5, within 6 + RENEW
    assert run.e.may_write()
    run.e.stop()
    assert await run.outcome() is Outcome.STOPPED


async def test_a_shorter_duration_ends_writes_when_it_runs_out_before_a_renewal() -> None:
    store, clock = LeaseStore(), FakeClock()
    client = StoreClient(store)
    run = Run(elector(client, clock))
    await advance(clock, 0.5)
    store.edit(leaseDurationSeconds=3)  # acquired at 0: writes until 3
    await settle()
    client.down = True  # no renewal lands
    assert run.e.may_write()
    await advance(clock, 2.25)
    assert run.e.is_leader and run.e.may_write(), "3 s after the acquisition, not before"
    await advance(clock, 0.5)
    assert not run.e.may_write()
    closure = run.e.fence.closure
    assert closure is not None and closure.at == 3.0 + 1000.0
    assert await run.outcome() is Outcome.LOST


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param({"renewTime": "2027-01-15T08:00:00.000000Z"}, id="renewTime"),
        pytest.param({"leaseDurationSeconds": 60}, id="a longer duration"),
        pytest.param({"leaseTransitions": 7}, id="leaseTransitions"),
    ],
)
async def test_an_edit_that_leaves_the_lease_ours_keeps_it(edit: dict[str, Any]) -> None:
    store, clock = LeaseStore(), FakeClock()
    run = await leading(store, clock)
    store.edit(**edit)
    await settle()
    assert run.e.may_write()
    await advance(clock, 3 * RETRY)
    assert run.e.is_leader and run.e.may_write()
    assert store.spec()["holderIdentity"] == "me"
    run.e.stop()
    assert await run.outcome() is Outcome.STOPPED


async def test_without_the_watch_the_next_renewal_sees_the_change() -> None:
    store, clock = LeaseStore(), FakeClock()
    client = StoreClient(store)
    run = await leading(store, clock, client)
    client.watching = False  # the watch is reconnecting
    store.delete()
    await settle()
    assert run.e.may_write(), "unseen: the renewal proof still holds"
    await advance(clock, RETRY)
    assert not run.e.may_write()
    closure = run.e.fence.closure
    assert closure is not None and closure.reason == "lease deleted"
    assert await run.outcome() is Outcome.LOST
    assert store.lease is None, "the old leader does not re-create it"


async def test_a_lease_unreadable_when_read_ends_leadership_without_a_crash() -> None:
    store, clock = LeaseStore(), FakeClock()
    client = StoreClient(store)
    run = await leading(store, clock, client)
    client.watching = False
    store.edit(leaseDurationSeconds="abc")
    await advance(clock, RETRY)
    assert await run.outcome() is Outcome.LOST
    assert store.spec()["leaseDurationSeconds"] == "abc", "left for its owner to fix"


async def test_a_standby_treats_an_unreadable_lease_as_held_for_a_lease_duration() -> None:
    store, clock = LeaseStore(), FakeClock()
    store.held_by("other")
    store.edit(leaseDurationSeconds="abc")
    e = elector(StoreClient(store), clock)
    assert not await e.try_acquire_or_renew()
    clock.advance(LEASE - 0.5)
    store.edit(renewTime="2027-01-15T08:01:00.000000Z")  # changed: held anew from now
    assert not await e.try_acquire_or_renew()
    clock.advance(LEASE - 0.5)
    assert not await e.try_acquire_or_renew()
    clock.advance(1.0)
    assert await e.try_acquire_or_renew()
    spec = store.spec()
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("me", int(LEASE))
    assert spec["leaseTransitions"] == 1


async def test_a_standby_ignores_changes_it_watches_only_while_leading() -> None:
    store, clock = LeaseStore(), FakeClock()
    store.held_by("other")
    run = Run(elector(StoreClient(store), clock))
    await advance(clock, 1)
    store.delete()
    await settle()
    assert not run.e.is_leader and run.e.fence.closure is None
    await advance(clock, RETRY * 2.2 + 0.5)
    assert run.e.is_leader, "a deleted lease is created by the standby"
    assert RENEW < LEASE
    run.e.stop()
    assert await run.outcome() is Outcome.STOPPED
