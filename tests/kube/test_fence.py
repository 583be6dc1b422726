"""``WriteFence``: open from a renewal's send time for its seconds, shortened by a
smaller Lease duration, closed once, and dated so a write can be told apart as sent
before or after writes stopped being allowed."""

from __future__ import annotations

import pytest
from troupe.api.clock import FakeClock
from troupe.kube.fence import DURATION_RAN_OUT, NOT_RENEWED, WriteFence


def opened(clock: FakeClock, seconds: float = 10.0) -> WriteFence:
    fence = WriteFence(clock)
    fence.open(clock.now(), seconds, lease="kube-system/troupe")
    return fence


def test_a_fence_never_opened_refuses() -> None:
    assert not WriteFence(FakeClock()).may_write()


def test_the_end_is_counted_from_the_renewal_sent_and_moves_with_each() -> None:
    clock = FakeClock()
    fence = opened(clock)
    clock.advance(9.9)
    assert fence.may_write()
    fence.renewed(clock.now() - 1.0, 10.0)  # sent a second ago, answered now
    clock.advance(9.0)
    assert not fence.may_write(), "ends 10 s after the renewal was sent, not answered"
    assert fence.closure is not None
    assert (fence.closure.reason, fence.closure.at) == (NOT_RENEWED, 1000.0 + 18.9)


def test_a_check_past_the_end_dates_the_closure_at_the_end() -> None:
    clock = FakeClock()
    fence = opened(clock)
    token = fence.let_through("POST /a/binding")
    assert token is not None
    clock.advance(30.0)  # paused: nothing ran for 30 s
    late = fence.let_through("POST /b/binding")
    assert late is None
    assert fence.closure is not None
    assert fence.closure.at == 1010.0
    assert fence.closure.on_the_wire == ("POST /a/binding",)


@pytest.mark.parametrize(
    ("duration", "open_after"),
    [
        pytest.param(0, False, id="0: closed at once"),
        pytest.param(2, False, id="shorter than the 3 s since the renewal: closed"),
        pytest.param(5, True, id="shorter than the deadline, longer than 3 s: end moves in"),
        pytest.param(60, True, id="longer than the deadline: nothing changes"),
    ],
)
def test_a_shorter_lease_duration(duration: int, open_after: bool) -> None:
    clock = FakeClock()
    fence = opened(clock)
    clock.advance(3.0)
    token = fence.let_through("PATCH /p/status")
    assert token is not None
    fence.shorten(duration)
    assert fence.may_write() is open_after
    if not open_after:
        assert fence.closure is not None
        assert fence.closure.reason == DURATION_RAN_OUT
        # Seen now: the write let through before is on the wire, not a violation.
        assert fence.closure.at == clock.now()
        assert fence.closure.on_the_wire == ("PATCH /p/status",)
        return
    clock.advance(min(duration, 10) - 3.0 - 0.01)
    assert fence.may_write()
    clock.advance(0.02)
    assert not fence.may_write()
    assert fence.closure is not None
    assert fence.closure.at == 1000.0 + min(duration, 10)


def test_a_renewal_after_a_shortening_restores_the_full_end() -> None:
    clock = FakeClock()
    fence = opened(clock)
    fence.shorten(4)
    clock.advance(2.0)
    fence.renewed(clock.now(), 10.0)
    clock.advance(9.0)
    assert fence.may_write()


def test_only_writes_not_answered_and_let_through_before_the_closure_are_on_the_wire() -> None:
    clock = FakeClock()
    fence = opened(clock)
    answered = fence.let_through("POST /events")
    waiting = fence.let_through("POST /p/binding")
    sent = fence.let_through("POST /q/binding")
    assert answered is not None and waiting is not None and sent is not None
    fence.answered(answered)
    assert fence.sending(sent)
    clock.advance(1.0)
    fence.close("lease deleted")
    assert not fence.sending(waiting), "the last check refuses what still waited"
    assert fence.closure is not None
    assert fence.closure.on_the_wire == ("POST /p/binding", "POST /q/binding")
    assert fence.on_the_wire == 1  # the one sent is still out until answered
    fence.answered(sent)
    assert fence.on_the_wire == 0


def test_a_fence_closes_once_and_a_new_term_opens_it_again() -> None:
    clock = FakeClock()
    fence = opened(clock)
    fence.close("lease taken by another replica", holder="b")
    first = fence.closure
    clock.advance(1.0)
    fence.close("lease deleted")
    assert fence.closure is first and fence.closed.is_set()
    fence.renewed(clock.now(), 10.0)  # a renewal landing after the closure opens nothing
    assert not fence.may_write()
    fence.open(clock.now(), 10.0)
    assert fence.may_write() and fence.closure is None and not fence.closed.is_set()
