"""Random sequences of queue operations keep the queue's invariants.

* pop always returns an active entity that no other active entity sorts before;
* every pod added and not deleted (nor bound) is in exactly one sub-queue or in
  flight, and nothing else is in the queue;
* a gated pod is exactly a pod that still has scheduling gates;
* no backoff runs longer than the configured maximum.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from troupe.api.events import ASSIGNED_POD_DELETE, NODE_ADD, ClusterEvent, QueueingHint
from troupe.api.objects import Pod
from troupe.queue import QueuedEntity, QueueName, priority_sort_less

from tests.plugins.builders import make_pod
from tests.queue.helpers import AFFINITY, FIT, GANG, POD_GROUP_ADD, Harness, harness

MAX_BACKOFF = 8.0
NAMES = st.sampled_from([f"p{i}" for i in range(8)])
EVENTS = st.sampled_from([NODE_ADD, ASSIGNED_POD_DELETE, POD_GROUP_ADD])
REJECTIONS = st.sampled_from(
    [((), ()), ((FIT,), ()), ((AFFINITY,), ()), ((FIT, AFFINITY), ()), ((), (GANG,))]
)


def _skip_labelled(pod: Pod, _old: object | None, _new: object | None) -> QueueingHint:
    if pod.metadata.labels.get("hint") == "skip":
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h: Harness = harness(initial_backoff=1.0, max_backoff=MAX_BACKOFF)
        self.h.register(FIT, NODE_ADD)
        self.h.register(AFFINITY, ASSIGNED_POD_DELETE, hint=_skip_labelled)
        self.h.register(GANG, POD_GROUP_ADD)
        self.alive: dict[str, Pod] = {}
        self.flying: dict[str, QueuedEntity] = {}
        self.zombies: list[QueuedEntity] = []  # attempts whose pod was deleted meanwhile

    # --- informer ---------------------------------------------------------------------

    @rule(name=NAMES, priority=st.integers(-2, 2), gated=st.booleans())
    def add(self, name: str, priority: int, gated: bool) -> None:
        key = f"default/{name}"
        if key in self.alive:
            return  # informers add a pod once; re-adds are updates
        builder = make_pod().name(name).priority(priority)
        if gated:
            builder.scheduling_gates("wait")
        p = builder.obj()
        self.h.queue.add(p)
        self.alive[key] = p

    @rule(name=NAMES, change=st.sampled_from(["label", "skip", "toleration", "ungate", "status"]))
    def update(self, name: str, change: str) -> None:
        key = f"default/{name}"
        if key not in self.alive:
            return
        new = self.alive[key].model_copy(deep=True)
        if change == "label":
            new.metadata.labels["v"] = str(len(new.metadata.labels))
        elif change == "skip":
            new.metadata.labels["hint"] = "skip"
        elif change == "toleration":
            new.spec.tolerations = [
                *new.spec.tolerations,
                *make_pod().toleration("x").obj().spec.tolerations,
            ]
        elif change == "ungate":
            new.spec.scheduling_gates = []
        else:
            new.status.nominated_node_name = "n1"
        self.h.queue.update(self.alive[key], new)
        self.alive[key] = new

    @rule(name=NAMES)
    def delete(self, name: str) -> None:
        key = f"default/{name}"
        if key not in self.alive:
            return
        self.h.queue.delete(self.alive.pop(key))
        if key in self.flying:
            self.zombies.append(self.flying.pop(key))

    # --- scheduling loop ----------------------------------------------------------------

    @rule()
    def pop(self) -> None:
        entity = self.h.queue.pop_nowait()
        if entity is None:
            assert self.h.queue.pending_counts()["active"] == 0
            return
        for other in self.h.queue.entities("active"):
            assert not priority_sort_less(other, entity), (
                f"{other.key} should pop before {entity.key}"
            )
        assert entity.key in self.alive and entity.key not in self.flying
        self.flying[entity.key] = entity

    @precondition(lambda self: self.flying)
    @rule(data=st.data(), rejection=REJECTIONS)
    def fail(self, data: st.DataObject, rejection: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
        key = data.draw(st.sampled_from(sorted(self.flying)))
        entity = self.flying.pop(key)
        where = self.h.fail(entity, *rejection)
        assert where is not None
        assert entity.backoff_expiry <= self.h.clock.now() + MAX_BACKOFF

    @precondition(lambda self: self.flying)
    @rule(data=st.data())
    def bind(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.flying)))
        self.h.queue.done(key, self.flying.pop(key))
        del self.alive[key]  # bound: no longer the queue's business

    @precondition(lambda self: self.zombies)
    @rule()
    def finish_deleted_attempt(self) -> None:
        assert self.h.fail(self.zombies.pop(), (FIT,)) is None

    # --- cluster and time ---------------------------------------------------------------

    @rule(event=EVENTS)
    def event(self, event: ClusterEvent) -> None:
        self.h.queue.on_event(event, None, None)

    @rule(name=NAMES)
    def activate(self, name: str) -> None:
        self.h.queue.activate([f"default/{name}"])

    @rule()
    def move_all(self) -> None:
        self.h.queue.move_all_to_active_or_backoff()

    @rule(seconds=st.sampled_from([0.5, 1.0, 3.0, 10.0, 400.0]))
    def tick(self, seconds: float) -> None:
        self.h.clock.advance(seconds)
        self.h.queue.flush_backoff_completed()
        self.h.queue.flush_unschedulable_leftover()

    # --- invariants -----------------------------------------------------------------------

    @invariant()
    def every_live_pod_is_in_exactly_one_place(self) -> None:
        q = self.h.queue
        places = {key: q.where(key) for key in self.alive}
        assert all(place is not None for place in places.values()), places
        for key, place in places.items():
            assert (place == "in_flight") == (key in self.flying), (key, place)
        queued = sum(q.pending_counts().values())
        assert queued == len(q) == len(self.alive) - len(self.flying)
        assert sorted(e.key for e in q.in_flight()) == sorted(self.flying)
        queues: tuple[QueueName, ...] = ("active", "backoff", "unschedulable", "gated")
        listed = [e.key for name in queues for e in q.entities(name)]
        assert len(listed) == len(set(listed)) == queued

    @invariant()
    def queued_entities_hold_the_latest_pod(self) -> None:
        for key, pod in self.alive.items():
            entity = self.h.queue.get(key)
            if entity is not None:
                assert entity.pods()[0] == pod

    @invariant()
    def gated_exactly_while_gates_remain(self) -> None:
        for key, pod in self.alive.items():
            if key not in self.flying:
                assert (self.h.queue.where(key) == "gated") == bool(pod.spec.scheduling_gates)

    @invariant()
    def backoff_is_bounded(self) -> None:
        now = self.h.clock.now()
        for entity in self.h.queue.entities("backoff"):
            assert now < entity.backoff_expiry <= now + MAX_BACKOFF or entity.backoff_expiry <= now


QueueMachine.TestCase.settings = settings(max_examples=120, stateful_step_count=40, deadline=None)
TestQueueMachine = QueueMachine.TestCase
