"""Random sequences of queue operations, with pods alone and in groups, keep the queue's invariants.

* pop always returns an active entity that no other active entity sorts before,
  and a popped group passes the gang checks (object present, no error, quorum);
* every pod added and not deleted (nor bound) is in exactly one place: its own
  entity, one group entity's members, or in flight; nothing else is in the queue,
  and the pod counts agree;
* queued entities hold the newest version of each pod;
* a pod is held alone in the gated pool exactly while it has scheduling gates;
  otherwise a pod of a gang group (or of a group not seen yet) is in its group
  entity, and any other pod is on its own;
* a gated group is gated for the reason the gang checks give now, and an active
  or backing-off group passes them;
* no backoff runs longer than the configured maximum.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from troupe.api.events import ASSIGNED_POD_DELETE, NODE_ADD, QueueingHint
from troupe.api.gangs import POD_GROUP_LABEL, GangPolicy, GroupProblem, group_ref_of
from troupe.api.objects import Pod
from troupe.queue import (
    GANG_SCHEDULING,
    MIN_COUNT_MESSAGE,
    QueuedEntity,
    QueuedGroupInfo,
    QueueName,
    missing_group_message,
    priority_sort_less,
)
from troupe.queue.pre_enqueue import in_flight_message

from tests.plugins.builders import make_pod
from tests.queue.helpers import (
    AFFINITY,
    BASIC,
    FIT,
    GANG,
    POD_GROUP_ADD,
    FakeGroups,
    Harness,
    gang,
    harness,
    ref,
)

MAX_BACKOFF = 8.0
QUEUES: tuple[QueueName, ...] = ("active", "backoff", "unschedulable", "gated")
NAMES = st.sampled_from([f"p{i}" for i in range(8)])
GROUP_NAMES = ["g0", "g1"]
# Pods join groups more often than not, and are rarely gated, so gangs do get popped.
GROUPS = st.sampled_from([None, "g0", "g0", "g1", "g1"])
GATED = st.sampled_from([False, False, False, True])
POLICIES = st.sampled_from([None, BASIC, gang(1), gang(2), gang(3), gang(2, priority=5)])
CHANGES = st.sampled_from(["label", "skip", "toleration", "ungate", "status", "regroup", "delete"])
IN_FLIGHT_CHANGES = st.sampled_from(["delete", "delete", "label", "regroup", "toleration"])
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
        self.groups = FakeGroups()
        self.groups.set("g0", gang(1))
        self.groups.set("g1", gang(2))
        self.h: Harness = harness(initial_backoff=1.0, max_backoff=MAX_BACKOFF, groups=self.groups)
        self.h.register(FIT, NODE_ADD)
        self.h.register(AFFINITY, ASSIGNED_POD_DELETE, hint=_skip_labelled)
        self.h.register(GANG, POD_GROUP_ADD)
        self.h.register(GANG_SCHEDULING, POD_GROUP_ADD)
        self.alive: dict[str, Pod] = {}
        # pod key -> the popped entity it is in flight with
        self.flying: dict[str, QueuedEntity] = {}
        # Attempts running, by pop number (a stable key: hypothesis replays draws).
        self.flights: dict[int, QueuedEntity] = {}
        self.pops = 0
        self.zombies: list[QueuedEntity] = []  # pod attempts whose pod was deleted meanwhile

    # --- informer ---------------------------------------------------------------------

    @initialize(
        pods=st.lists(
            st.tuples(NAMES, st.integers(-2, 2), GROUPS),
            min_size=2,
            max_size=6,
            unique_by=lambda t: t[0],
        )
    )
    def seed(self, pods: list[tuple[str, int, str | None]]) -> None:
        """Start with a few pods, so that attempts begin early."""
        for name, priority, group in pods:
            self.add(name, priority, False, group)

    @rule(name=NAMES, priority=st.integers(-2, 2), gated=GATED, group=GROUPS)
    def add(self, name: str, priority: int, gated: bool, group: str | None) -> None:
        key = f"default/{name}"
        if key in self.alive:
            return  # informers add a pod once; re-adds are updates
        builder = make_pod().name(name).priority(priority)
        if gated:
            builder.scheduling_gates("wait")
        if group is not None:
            builder.label(POD_GROUP_LABEL, group)
        p = builder.obj()
        self.h.queue.add(p)
        self.alive[key] = p

    @rule(
        name=NAMES,
        change=CHANGES,
        group=GROUPS,
    )
    def update(self, name: str, change: str, group: str | None) -> None:
        key = f"default/{name}"
        if key not in self.alive:
            return
        if change == "delete":
            self._delete(key)
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
        elif change == "regroup":
            new.metadata.labels.pop(POD_GROUP_LABEL, None)
            if group is not None:
                new.metadata.labels[POD_GROUP_LABEL] = group
        else:
            new.status.nominated_node_name = "n1"
        self.h.queue.update(self.alive[key], new)
        self.alive[key] = new

    @precondition(lambda self: self.flying)
    @rule(data=st.data(), change=IN_FLIGHT_CHANGES, group=GROUPS)
    def change_in_flight(self, data: st.DataObject, change: str, group: str | None) -> None:
        """A pod being scheduled is updated or deleted (its attempt sees it later)."""
        key = data.draw(st.sampled_from(sorted(self.flying)))
        self.update(key.removeprefix("default/"), change, group)

    def _delete(self, key: str) -> None:
        self.h.queue.delete(self.alive.pop(key))
        entity = self.flying.pop(key, None)
        if entity is not None and not isinstance(entity, QueuedGroupInfo):
            self._forget_flight(entity)
            self.zombies.append(entity)

    @rule(group=st.sampled_from(GROUP_NAMES), policy=POLICIES, problem=GATED,
          by_object=st.booleans(), placed_gone=GATED)  # fmt: skip
    def change_group(
        self,
        group: str,
        policy: GangPolicy | None,
        problem: bool,
        by_object: bool,
        placed_gone: bool,
    ) -> None:
        """The group object changes; or a placed member goes away (placed count drops)."""
        r = ref(group)
        if placed_gone:
            self.groups.placed[r.key] = max(0, self.groups.placed.get(r.key, 0) - 1)
        else:
            self.groups.set(group, policy)
            if problem:
                self.groups.problems[r.key] = GroupProblem(r, "spec.minMember", "bad")
            else:
                self.groups.problems.pop(r.key, None)
        self.h.queue.group_changed(r.object_key if by_object else r)

    # --- scheduling loop ----------------------------------------------------------------

    @rule(data=st.data(), outcome=st.sampled_from(["hold", "hold", "bind", "fail", "fail"]),
          rejection=REJECTIONS)  # fmt: skip
    def pop(
        self,
        data: st.DataObject,
        outcome: str,
        rejection: tuple[tuple[str, ...], tuple[str, ...]],
    ) -> None:
        """Pop, then keep the entity in flight or end its attempt at once."""
        entity = self._pop()
        if entity is None or outcome == "hold":
            return
        if outcome == "bind":
            self._bind(entity)
        else:
            self._fail(data, entity, rejection)

    def _pop(self) -> QueuedEntity | None:
        entity = self.h.queue.pop_nowait()
        if entity is None:
            assert self.h.queue.pending_counts()["active"] == 0
            return None
        for other in self.h.queue.entities("active"):
            assert not priority_sort_less(other, entity), (
                f"{other.key} should pop before {entity.key}"
            )
        if isinstance(entity, QueuedGroupInfo):
            assert self._gate_message(entity) is None, entity.key
            assert entity.members
        for key in entity.pod_keys():
            assert key in self.alive and key not in self.flying, key
            assert not self.alive[key].spec.scheduling_gates
            self.flying[key] = entity
        self.pops += 1
        self.flights[self.pops] = entity
        return entity

    def _forget_flight(self, entity: QueuedEntity) -> None:
        self.flights = {n: e for n, e in self.flights.items() if e is not entity}

    @precondition(lambda self: self.flights)
    @rule(data=st.data(), outcome=st.sampled_from(["bind", "fail"]), rejection=REJECTIONS)
    def end_flight(
        self,
        data: st.DataObject,
        outcome: str,
        rejection: tuple[tuple[str, ...], tuple[str, ...]],
    ) -> None:
        """An attempt held in flight ends: every pod placed, or some or all rejected."""
        entity = self.flights[data.draw(st.sampled_from(sorted(self.flights)))]
        if outcome == "bind":
            self._bind(entity)
        else:
            self._fail(data, entity, rejection)

    def _fail(
        self,
        data: st.DataObject,
        entity: QueuedEntity,
        rejection: tuple[tuple[str, ...], tuple[str, ...]],
    ) -> None:
        self._forget_flight(entity)
        rejected, pending = rejection
        if isinstance(entity, QueuedGroupInfo):
            members = sorted(entity.members)
            remaining = data.draw(st.lists(st.sampled_from(members), unique=True))
            for key in members:
                if self.flying.get(key) is entity and key not in remaining:
                    self._bound(key)  # placed: assumed, then bound
            where = self.h.queue.requeue_group_remainder(
                entity,
                remaining,
                self.h.queue.scheduling_cycle,
                unschedulable_plugins=rejected,
                pending_plugins=pending,
            )
            for key in members:
                if self.flying.get(key) is entity:
                    del self.flying[key]
        else:
            del self.flying[entity.key]
            where = self.h.fail(entity, rejected, pending)
            assert where is not None
        if where is not None:
            assert entity.backoff_expiry <= self.h.clock.now() + MAX_BACKOFF

    def _bind(self, entity: QueuedEntity) -> None:
        self._forget_flight(entity)
        for key in list(entity.pod_keys()):
            if self.flying.get(key) is entity:
                self._bound(key)
        self.h.queue.done(entity.key, entity)

    def _bound(self, key: str) -> None:
        del self.flying[key]
        r = group_ref_of(self.alive.pop(key))
        if r is not None:
            self.groups.placed[r.key] = self.groups.placed.get(r.key, 0) + 1
            self.h.queue.group_changed(r)

    @precondition(lambda self: self.zombies)
    @rule()
    def finish_deleted_attempt(self) -> None:
        assert self.h.fail(self.zombies.pop(), (FIT,)) is None

    # --- cluster and time ---------------------------------------------------------------

    @rule(data=st.data(), what=st.sampled_from(["event", "activate", "move_all", "tick"]))
    def cluster(self, data: st.DataObject, what: str) -> None:
        """A cluster event, a forced activation or move, or time passing (with the flushes)."""
        if what == "event":
            self.h.queue.on_event(data.draw(EVENTS), None, None)
        elif what == "activate":
            self.h.queue.activate([f"default/{data.draw(NAMES)}"])
        elif what == "move_all":
            self.h.queue.move_all_to_active_or_backoff()
        else:
            self.h.clock.advance(data.draw(st.sampled_from([0.5, 1.0, 3.0, 10.0, 400.0])))
            self.h.queue.flush_backoff_completed()
            self.h.queue.flush_unschedulable_leftover()

    # --- the model's view of the gang checks --------------------------------------------

    def _managed(self, pod: Pod) -> bool:
        r = group_ref_of(pod)
        if r is None:
            return False
        policy = self.groups.policy(r)
        return policy is None or policy.gang

    def _gate_message(self, entity: QueuedGroupInfo) -> str | None:
        r = entity.ref
        policy = self.groups.policy(r)
        if policy is None:
            return missing_group_message(r)
        if (problem := self.groups.problem(r)) is not None:
            return str(problem)
        if any(
            isinstance(e, QueuedGroupInfo) and e.key == entity.key for e in self.flights.values()
        ):
            return in_flight_message(r)
        if policy.gang and self.groups.placed_count(r.key) + len(entity.members) < policy.min_count:
            return MIN_COUNT_MESSAGE
        return None

    # --- invariants -----------------------------------------------------------------------

    @invariant()
    def every_live_pod_is_in_exactly_one_place(self) -> None:
        q = self.h.queue
        seen: dict[str, QueueName] = {}
        for name in QUEUES:
            for entity in q.entities(name):
                for key in entity.pod_keys():
                    assert key not in seen, f"{key} queued twice"
                    seen[key] = name
        assert set(seen) | set(self.flying) == set(self.alive)
        assert not set(seen) & set(self.flying)
        for key in self.alive:
            assert q.where(key) == seen.get(key, "in_flight"), key
        counts = q.pending_counts()
        assert sum(counts.values()) == len(seen) == len(self.alive) - len(self.flying)
        for name in QUEUES:
            assert counts[name] == sum(len(e.pod_keys()) for e in q.entities(name))
        entities = q.entity_counts()
        assert sum(entities.values()) == len(q)
        groups = sum(isinstance(e, QueuedGroupInfo) for n in QUEUES for e in q.entities(n))
        assert sum(n for (_, kind), n in entities.items() if kind == "podgroup") == groups
        assert sorted(map(id, q.in_flight())) == sorted(map(id, self.flights.values()))

    @invariant()
    def queued_entities_hold_the_latest_pod(self) -> None:
        for name in QUEUES:
            for entity in self.h.queue.entities(name):
                for p in entity.pods():
                    assert p == self.alive[p.key]

    @invariant()
    def pods_wait_alone_or_in_their_group_as_their_gates_and_group_say(self) -> None:
        for key, pod in self.alive.items():
            if key in self.flying:
                continue
            entity = self.h.queue.get(key)
            assert entity is not None
            if pod.spec.scheduling_gates:
                assert entity.kind == "pod" and self.h.queue.where(key) == "gated", key
            elif self._managed(pod):
                assert isinstance(entity, QueuedGroupInfo) and entity.ref == group_ref_of(pod)
            else:
                assert entity.kind == "pod" and self.h.queue.where(key) != "gated", key

    @invariant()
    def groups_are_gated_for_the_reason_the_gang_checks_give(self) -> None:
        for name in ("active", "backoff", "gated"):
            for entity in self.h.queue.entities(name):
                if isinstance(entity, QueuedGroupInfo):
                    expected = self._gate_message(entity)
                    assert (entity.gating_message if name == "gated" else None) == expected

    @invariant()
    def backoff_is_bounded(self) -> None:
        now = self.h.clock.now()
        for entity in self.h.queue.entities("backoff"):
            assert now < entity.backoff_expiry <= now + MAX_BACKOFF or entity.backoff_expiry <= now


QueueMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=50, deadline=None)
TestQueueMachine = QueueMachine.TestCase
