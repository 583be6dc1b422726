"""WorkerPool: held slots, coroutines run on a few long-lived workers."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.tasks import WorkerPool


async def test_slots_bound_how_many_run_and_are_granted_in_order() -> None:
    pool = WorkerPool("binding", limit=2)
    gate = asyncio.Event()
    ran: list[int] = []

    async def job(i: int) -> None:
        ran.append(i)
        await gate.wait()

    for i in range(2):
        await pool.acquire()
        pool.spawn(job(i))
    waiters = [asyncio.create_task(pool.acquire()) for _ in range(2)]
    await asyncio.sleep(0)
    assert len(pool) == 2 and not any(w.done() for w in waiters)
    gate.set()
    await asyncio.wait_for(asyncio.gather(*waiters), 1)
    for i in (2, 3):
        pool.spawn(job(i))
    assert await pool.drain(timeout=1)
    assert ran == [0, 1, 2, 3] and len(pool) == 0


async def test_workers_are_reused_and_never_more_than_the_limit() -> None:
    pool = WorkerPool("binding", limit=3)
    tasks_seen: set[asyncio.Task[object] | None] = set()

    async def job() -> None:
        tasks_seen.add(asyncio.current_task())
        await asyncio.sleep(0)

    for _ in range(50):
        await pool.acquire()
        pool.spawn(job())
    assert await pool.drain(timeout=1)
    assert 1 <= len(tasks_seen) <= 3
    assert pool.started == 50


async def test_a_failing_coroutine_is_counted_and_frees_its_slot() -> None:
    pool = WorkerPool("binding", limit=1)

    async def boom() -> None:
        raise RuntimeError("no")

    async def fine() -> None:
        return None

    await pool.acquire()
    pool.spawn(boom())
    await asyncio.wait_for(pool.acquire(), 1)  # the failed one gave its slot back
    pool.spawn(fine())
    assert await pool.drain(timeout=1)
    assert pool.failures == 1


async def test_idle_waits_for_running_coroutines() -> None:
    pool = WorkerPool("binding", limit=4)
    await pool.idle()  # nothing running: at once
    gate = asyncio.Event()
    await pool.acquire()
    pool.spawn(gate.wait())
    idle = asyncio.create_task(pool.idle())
    await asyncio.sleep(0)
    assert not idle.done()
    gate.set()
    await asyncio.wait_for(idle, 1)


async def test_drain_times_out_and_cancel_all_stops_what_runs() -> None:
    pool = WorkerPool("binding", limit=2)
    cancelled = asyncio.Event()

    async def stuck() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    await pool.acquire()
    pool.spawn(stuck())
    await asyncio.sleep(0)
    assert not await pool.drain(timeout=0.01)
    await pool.cancel_all()
    assert cancelled.is_set() and len(pool) == 0
    # The slot came back: the pool still works after its workers were cancelled.
    await asyncio.wait_for(pool.acquire(), 1)
    pool.spawn(asyncio.sleep(0))
    assert await pool.drain(timeout=1)


async def test_a_cancelled_acquire_takes_no_slot() -> None:
    pool = WorkerPool("binding", limit=1)
    await pool.acquire()
    waiter = asyncio.create_task(pool.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(0)
    pool.spawn(asyncio.sleep(0))  # the held slot's coroutine ends and frees it
    assert await pool.drain(timeout=1)
    await asyncio.wait_for(pool.acquire(), 1)


async def test_a_full_pool_with_refill_wakes_its_waiter_once_a_batch_is_free() -> None:
    pool = WorkerPool("binding", limit=8, refill=4)
    gates = [asyncio.Event() for _ in range(8)]

    async def job(i: int) -> None:
        await gates[i].wait()

    for i in range(8):
        await pool.acquire()
        pool.spawn(job(i))
    waiter = asyncio.create_task(pool.acquire())
    await asyncio.sleep(0)  # waiting before any slot frees
    for i in range(3):
        gates[i].set()
        await asyncio.sleep(0.01)
        assert not waiter.done(), f"woken with {i + 1} free slot(s)"
    gates[3].set()
    await asyncio.wait_for(waiter, 1)
    # The rest of the batch is taken without waiting.
    for _ in range(3):
        await asyncio.wait_for(pool.acquire(), 0.01)
    for gate in gates:
        gate.set()
    assert await pool.drain(timeout=1)


async def test_a_refill_waiter_is_woken_when_nothing_is_left_running() -> None:
    # Two slots held but never spawned: the last running coroutine ending wakes the
    # waiter with fewer free slots than the refill, rather than never.
    pool = WorkerPool("binding", limit=4, refill=4)
    for _ in range(3):
        await pool.acquire()
    gate = asyncio.Event()
    await pool.acquire()
    pool.spawn(gate.wait())
    waiter = asyncio.create_task(pool.acquire())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    gate.set()
    await asyncio.wait_for(waiter, 1)


async def test_growing_the_pool_grants_waiters_at_once() -> None:
    pool = WorkerPool("binding", limit=2, refill=2)
    gate = asyncio.Event()
    for _ in range(2):
        await pool.acquire()
        pool.spawn(gate.wait())
    waiters = [asyncio.create_task(pool.acquire()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    pool.resize(5, refill=1)
    await asyncio.wait_for(asyncio.gather(*waiters), 1)
    for _ in waiters:
        pool.spawn(gate.wait())
    assert len(pool) == 5
    gate.set()
    assert await pool.drain(timeout=1)


async def test_a_shrunk_pool_grants_no_slot_until_fewer_than_its_limit_run() -> None:
    pool = WorkerPool("binding", limit=4)
    gates = [asyncio.Event() for _ in range(4)]
    for gate in gates:
        await pool.acquire()
        pool.spawn(gate.wait())
    pool.resize(2)
    waiter = asyncio.create_task(pool.acquire())
    for i in range(2):
        gates[i].set()
        await asyncio.sleep(0.01)
        assert not waiter.done(), f"granted with {4 - i - 1} of a limit of 2 running"
    gates[2].set()
    await asyncio.wait_for(waiter, 1)
    pool.spawn(asyncio.sleep(0))
    gates[3].set()
    assert await pool.drain(timeout=1)


Op = tuple[str, int]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("start"), st.just(0)),
            st.tuples(st.just("finish"), st.integers(0, 20)),
            st.tuples(st.just("resize"), st.integers(1, 6)),
        ),
        max_size=40,
    ),
    st.integers(1, 6),
)
def test_no_slot_is_granted_beyond_the_limit_and_every_waiter_gets_one(
    ops: list[Op], first_limit: int
) -> None:
    """Whatever the order of acquires, finishing coroutines and resizes: a slot is
    granted only while fewer than the limit of that moment are held, and once all
    coroutines may finish every caller has had its slot."""

    async def play() -> None:
        pool = WorkerPool("binding", limit=first_limit, refill=max(1, first_limit // 4))
        held = 0
        gates: list[asyncio.Event] = []
        clients: list[asyncio.Task[None]] = []

        async def client() -> None:
            nonlocal held
            await pool.acquire()
            held += 1
            assert held <= pool.limit, f"{held} held with a limit of {pool.limit}"
            gate = asyncio.Event()
            gates.append(gate)

            async def job() -> None:
                nonlocal held
                await gate.wait()
                held -= 1

            pool.spawn(job())

        for op, n in ops:
            if op == "start":
                clients.append(asyncio.create_task(client()))
            elif op == "finish" and gates:
                gates.pop(n % len(gates)).set()
            elif op == "resize":
                pool.resize(n, refill=max(1, n // 4))
            for _ in range(3):
                await asyncio.sleep(0)
        for _ in range(10 * len(clients) + 10):
            if all(c.done() for c in clients) and not gates:
                break
            for gate in gates:
                gate.set()
            gates.clear()
            await asyncio.sleep(0)
        assert all(c.done() for c in clients), "a caller never got its slot"
        await asyncio.gather(*clients)
        assert await pool.drain(timeout=1)
        assert held == 0 and pool.started == len(clients)

    asyncio.run(play())


async def test_a_shrunk_pool_grants_nothing_while_its_held_slots_are_not_yet_running() -> None:
    """A gang's admission acquires its members' slots before it spawns them."""
    pool = WorkerPool("binding", limit=4)
    for _ in range(4):
        await pool.acquire()
    waiter = asyncio.create_task(pool.acquire())
    await asyncio.sleep(0)
    pool.resize(2)
    await asyncio.sleep(0.01)
    assert not waiter.done()
    waiter.cancel()
