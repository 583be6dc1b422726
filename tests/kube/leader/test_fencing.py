"""Lease fencing: a replica sends a write only while it can prove the lease on its own
monotonic clock; one stalled past the renew deadline sends nothing and stops leading.
"""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.client import ApiError, WriteFenced
from troupe.api.clock import FakeClock
from troupe.kube.fence import FencedTransport
from troupe.kube.leader import Outcome
from troupe.kube.transport import Response

from tests.kube.leader.fakes import LeaseStore, StoreClient
from tests.kube.leader.test_elector import RENEW, RETRY, Run, advance, elector, settle


class Recording:
    """A transport that records what reaches it."""

    base_url = "http://api"

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def request(self, method: str, path: str, **_: Any) -> Response:
        self.sent.append((method, path))
        return Response(201, {}, b"{}")

    def stream(self, path: str, *, query: Any, timeout: float) -> Any:
        raise NotImplementedError


BIND = ("POST", "/api/v1/namespaces/default/pods/p/binding")


async def test_a_leader_writes_while_its_renewals_are_fresh() -> None:
    store, clock = LeaseStore(), FakeClock()
    run = Run(elector(StoreClient(store), clock))
    await advance(clock, 0.5)
    inner = Recording()
    fenced = FencedTransport(inner, run.e.fence)
    await advance(clock, 5 * RETRY)  # renewing all along
    await fenced.request(*BIND)
    assert inner.sent == [BIND]
    run.e.stop()
    assert await run.outcome() is Outcome.STOPPED


async def test_a_leader_stalled_past_the_renew_deadline_sends_nothing_and_stops_leading() -> None:
    store, clock = LeaseStore(), FakeClock()
    run = Run(elector(StoreClient(store), clock))
    await advance(clock, 0.5)
    inner = Recording()
    fenced = FencedTransport(inner, run.e.fence)
    # The process was stopped (SIGSTOP, a VM pause): time passed, nothing ran. Its
    # queued writes run first when it resumes, before the renew loop does.
    clock.advance(RENEW + 6)
    with pytest.raises(WriteFenced):
        await fenced.request(*BIND)
    # Reads still go out (they change nothing); writes never do.
    await fenced.request("GET", "/api/v1/pods")
    with pytest.raises(WriteFenced):
        await fenced.request("PATCH", "/api/v1/namespaces/default/pods/p/status")
    assert inner.sent == [("GET", "/api/v1/pods")]
    assert fenced.fenced == 2
    await settle()
    assert not run.e.is_leader
    assert run.stopped == 1
    assert await run.outcome() is Outcome.LOST


async def test_a_stalled_leader_stops_at_its_next_renewal_even_without_writes() -> None:
    store, clock = LeaseStore(), FakeClock()
    run = Run(elector(StoreClient(store), clock))
    await advance(clock, 0.5)
    writes_before = len(store.writes)
    clock.advance(RENEW + 6)
    await settle()
    assert run.task.done() and run.task.result() is Outcome.LOST
    # It did not renew a lease that may be someone else's by now (it released it
    # only as a best effort with a precondition).
    assert all(
        w.get("holderIdentity") != "me" or w["leaseDurationSeconds"] == 1
        for w in store.writes[writes_before:]
    )


async def test_the_lease_counts_from_when_the_renewal_was_sent() -> None:
    store, clock = LeaseStore(), FakeClock()
    client = StoreClient(store)
    run = Run(elector(client, clock))
    await advance(clock, 0.5)  # acquired at 0
    # The next renewal (sent at 2) is answered only at 8; after it the API is gone.
    original = client._gate

    async def slow_then_down() -> None:
        await original()
        client._gate = down  # type: ignore[method-assign]
        await clock.sleep(6)

    async def down() -> None:
        client.requests += 1
        raise ApiError(0, "connection refused")

    client._gate = slow_then_down  # type: ignore[method-assign]
    await advance(clock, 11 - 0.5)
    assert run.e.is_leader and run.e.may_write(), "the renewal sent at 2 holds until 12"
    await advance(clock, 1.5)
    # Counted from the answer (8) it would hold until 18: the other replicas may
    # have seen it land as early as 2.
    assert not run.e.may_write()
    assert run.task.done() and run.task.result() is Outcome.LOST
