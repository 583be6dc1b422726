"""Pop order, waiting for work, and closing."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.queue import QueuedPodInfo, SortKey, priority_sort_key, priority_sort_less
from troupe.queue.heap import EntityHeap

from tests.plugins.builders import make_pod
from tests.queue.helpers import FIT, harness, pod


def entity(key: str, priority: int = 0, timestamp: float = 0.0) -> QueuedPodInfo:
    info = make_pod().name(key).priority(priority).info()
    return QueuedPodInfo.of(info, timestamp)


@pytest.mark.parametrize(
    ("a", "b", "a_first"),
    [
        pytest.param(entity("x", 10), entity("y", 1), True, id="higher priority first"),
        pytest.param(entity("x", 1), entity("y", 10), False, id="lower priority later"),
        pytest.param(
            entity("x", 5, 2.0), entity("y", 5, 1.0), False, id="same priority: earlier entry first"
        ),
        pytest.param(
            entity("a", 5, 1.0), entity("b", 5, 1.0), True, id="same priority and time: key order"
        ),
        pytest.param(
            entity("a", 5, 1.0), entity("a", 5, 1.0), False, id="an entity is not before itself"
        ),
    ],
)  # fmt: skip
def test_priority_sort_less(a: QueuedPodInfo, b: QueuedPodInfo, a_first: bool) -> None:
    assert priority_sort_less(a, b) is a_first


_entities = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=30),  # name
        st.integers(min_value=-3, max_value=3),  # priority
        st.integers(min_value=0, max_value=3),  # timestamp
    ),
    max_size=40,
)


@pytest.mark.parametrize("key", [None, priority_sort_key], ids=["by less", "by key"])
@settings(max_examples=100, deadline=None)
@given(
    pushes=_entities,
    removals=st.lists(st.integers(min_value=0, max_value=30), max_size=20),
    repushes=_entities,
)
def test_heap_pops_in_queue_sort_order_after_pushes_and_removals(
    key: SortKey | None,
    pushes: list[tuple[int, int, int]],
    removals: list[int],
    repushes: list[tuple[int, int, int]],
) -> None:
    heap = EntityHeap(priority_sort_less, key)
    expected: dict[str, QueuedPodInfo] = {}
    for name, priority, ts in pushes:
        pushed = entity(f"p{name}", priority, float(ts))
        heap.push(pushed)
        expected[pushed.key] = pushed
    for name in removals:
        removed = heap.remove(f"default/p{name}")
        expected.pop(f"default/p{name}", None)
        if removed is not None:
            # The queue changes a removed entity before it pushes it again.
            removed.priority += 7
    for name, priority, ts in repushes:
        # Pushing a queued entity again replaces it (its old slot dies in place).
        pushed = entity(f"p{name}", priority, float(ts))
        heap.push(pushed)
        expected[pushed.key] = pushed
    popped: list[str] = []
    while (head := heap.pop()) is not None:
        popped.append(head.key)
    order = sorted(expected.values(), key=lambda e: (-e.priority, e.timestamp, e.key))
    assert popped == [e.key for e in order]
    assert len(heap) == 0


@settings(max_examples=100, deadline=None)
@given(
    keys=st.lists(
        st.tuples(st.integers(0, 20), st.lists(st.integers(-2, 2), min_size=1, max_size=3)),
        max_size=40,
    ),
    removals=st.lists(st.integers(0, 20), max_size=10),
)
def test_heap_orders_by_keys_of_any_lengths(
    keys: list[tuple[int, list[int]]], removals: list[int]
) -> None:
    """Keys of one length are spread into the heap's items; one of another length
    turns them back into tuples: the order is the keys' either way (equal keys in
    push order)."""
    of: dict[str, tuple[int, ...]] = {}

    def key(e: object) -> tuple[int, ...]:
        return of[getattr(e, "key")]  # noqa: B009

    heap = EntityHeap(priority_sort_less, key)
    pushed: dict[str, tuple[tuple[int, ...], int]] = {}
    for n, (name, k) in enumerate(keys):
        e = entity(f"p{name}")
        of[e.key] = tuple(k)
        heap.push(e)
        pushed[e.key] = (tuple(k), n)
    for name in removals:
        if heap.remove(f"default/p{name}") is not None:
            del pushed[f"default/p{name}"]
    popped: list[str] = []
    while (head := heap.pop()) is not None:
        popped.append(head.key)
    assert popped == sorted(pushed, key=lambda k: pushed[k])


async def test_pop_waits_for_an_add() -> None:
    h = harness()
    waiter = asyncio.create_task(h.queue.pop())
    await asyncio.sleep(0)
    assert not waiter.done()
    h.queue.add(pod("p"))
    got = await asyncio.wait_for(waiter, timeout=1.0)
    assert got is not None and got.key == "default/p"
    assert h.queue.where("default/p") == "in_flight"


async def test_pop_returns_none_once_closed() -> None:
    h = harness()
    waiter = asyncio.create_task(h.queue.pop())
    await asyncio.sleep(0)
    h.queue.close()
    assert await asyncio.wait_for(waiter, timeout=1.0) is None
    h.queue.add(pod("p"))
    assert await h.queue.pop() is None


async def test_pop_returns_the_best_entity_and_marks_it_in_flight() -> None:
    h = harness()
    h.queue.add(pod("low", priority=1))
    h.clock.advance(1)
    h.queue.add(pod("high", priority=9))
    first = await h.queue.pop()
    assert first is not None and first.key == "default/high"
    assert (first.attempts, first.initial_attempt_timestamp) == (1, 1001.0)
    assert h.queue.scheduling_cycle == 1
    assert [e.key for e in h.queue.in_flight()] == ["default/high"]
    h.queue.done(first.key)
    assert h.queue.in_flight() == []


async def test_a_pod_moved_by_an_event_wakes_a_waiting_pop() -> None:
    h = harness(initial_backoff=0.0, max_backoff=0.0)
    h.add_and_fail(pod("p"), rejected_by=[FIT])
    waiter = asyncio.create_task(h.queue.pop())
    await asyncio.sleep(0)
    assert not waiter.done()
    h.queue.move_all_to_active_or_backoff()
    got = await asyncio.wait_for(waiter, timeout=1.0)
    assert got is not None and got.key == "default/p"
