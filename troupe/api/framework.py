"""The plugin contract: one Protocol per extension point, and the values they return.

Plugins (``troupe.plugins``) implement any subset of these Protocols; the runtime in
``troupe.scheduler.framework.runtime`` discovers which by ``isinstance`` checks at start-up
and calls them in profile order. The scheduling-cycle points are synchronous (the
cycle must not yield to the event loop: the live NodeTable is its snapshot);
PreBind and Bind are coroutines run in the binding cycle.

Filter and Score are batch operations over the NodeTable (DESIGN.md):
- Filter returns a ``FilterResult``: a feasibility mask over all slots, plus, only
  if someone asks (a failed cycle), the reasons per rejected node.
- Score returns one integer per candidate slot; NormalizeScore rescales in place
  to ``[0, MAX_NODE_SCORE]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from troupe.api.client import SchedulerClient
from troupe.api.clock import Clock
from troupe.api.cycle import CycleState
from troupe.api.events import ClusterEventWithHint
from troupe.api.gangs import GangApi, GroupDirectory, GroupKey, GroupRef
from troupe.api.nodetable import BoolArray, IndexArray, IntArray, NodeTable
from troupe.api.objects import Namespace, Pod
from troupe.api.pdb import PodDisruptionBudget
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.api.topology import TopologyLevels

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


@dataclass(frozen=True, slots=True)
class Rejection:
    """``reason`` applies to every slot set in ``nodes`` (a capacity-long mask)."""

    reason: str
    nodes: BoolArray
    code: Code = Code.UNSCHEDULABLE


def _no_rejections() -> Sequence[Rejection]:
    return ()


@dataclass(frozen=True, slots=True)
class FilterResult:
    feasible: BoolArray
    # Called only when the cycle fails, to say why nodes were rejected. A node may
    # carry several reasons (e.g. "Insufficient cpu" and "Insufficient memory").
    explain: Callable[[], Sequence[Rejection]] = _no_rejections
    # A non-success here fails the whole cycle (Code.ERROR) or every node.
    status: Status = field(default_factory=Status)

    @classmethod
    def masked(
        cls, feasible: BoolArray, reason: str, code: Code = Code.UNSCHEDULABLE
    ) -> FilterResult:
        """One reason for every rejected slot."""
        return cls(feasible, lambda: (Rejection(reason, ~feasible, code),))

    @classmethod
    def all(cls, table: NodeTable) -> FilterResult:
        return cls(np.ones(table.capacity, dtype=bool))

    @classmethod
    def none(cls, table: NodeTable, reason: str, code: Code = Code.UNSCHEDULABLE) -> FilterResult:
        return cls.masked(np.zeros(table.capacity, dtype=bool), reason, code)

    @classmethod
    def failed(cls, table: NodeTable, status: Status) -> FilterResult:
        return cls(np.zeros(table.capacity, dtype=bool), status=status)


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Restricts the cycle to these nodes (``None``: all nodes), e.g. NodeName."""

    node_names: frozenset[str] | None = None


@dataclass(slots=True)
class Diagnosis:
    """Why a pod fits nowhere: per-reason node counts, and which plugins said so."""

    num_nodes: int = 0
    reason_counts: dict[str, int] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)
    # Slots rejected with a code preemption cannot fix (UnschedulableAndUnresolvable).
    unresolvable: BoolArray | None = None
    pre_filter_message: str = ""
    post_filter_message: str = ""
    # "<extension point>/<plugin>" -> how many nodes it was first to reject
    # (``troupe explain``; the FitError message counts per reason instead).
    plugin_counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """What PostFilter proposes. With ``victims``: the pod fits on
    ``nominated_node_name`` once they are gone; the scheduler nominates it there and
    evicts them. Without: ``nominated_node_name`` "" clears an earlier nomination."""

    nominated_node_name: str = ""
    victims: tuple[PodInfo, ...] = ()


# --- the extension points --------------------------------------------------------


class Plugin(Protocol):
    """Every plugin has a ``name``; what else it can do it declares: the
    extension-point Protocols below it implements, and its ``PluginTraits``."""

    @property
    def name(self) -> str: ...


@dataclass(frozen=True, slots=True)
class PluginTraits:
    """What the engine may assume of a plugin, declared as its class attribute
    ``traits`` and read once, when the profile's framework is built (upstream asks
    the same through interfaces such as ``BatchablePlugin``). A plugin that declares
    nothing gets the defaults: nothing assumed."""

    # Its Filter and Score of a node depend only on that node and the pod being
    # scheduled (not on other nodes, on where other pods are, nor on anything its
    # Reserve keeps): placing a pod on node n changes no verdict or score of any
    # other node. Runs of identical pods and gang members are then placed as a
    # batch, re-evaluating only the node that just received a pod (KEP-5598).
    # A plugin active for a pod (its PreFilter did not SKIP) that is not node-local
    # turns batching off for that pod.
    node_local: bool = False
    # Its verdict and score do not depend on the pods placed on the node at all
    # (only on the node object: labels, taints, name, unschedulable): that node is
    # not re-evaluated by it after a pod lands.
    node_only: bool = False
    # Its Filter's verdict on a node moves as pods land there only by the node's
    # free resources (and one pod per host port), which the gang capacity bound
    # (``troupe.scheduler.gangs.capacity``) models exactly.
    capacity_modelled: bool = False
    # It gangs pods one by one at a Permit barrier (scheduler-plugins
    # Coscheduling): its profile queues gang members as single pods.
    gang_permit_barrier: bool = False
    # Its PostFilter runs are preemption attempts (``scheduler_preemption_attempts_
    # total``), and "preemption cannot help" from it ends an earlier nomination.
    preemption: bool = False


NO_TRAITS = PluginTraits()


@runtime_checkable
class DeclaresTraits(Protocol):
    """A plugin that declares ``traits`` (a class attribute)."""

    traits: ClassVar[PluginTraits]


def traits_of(plugin: object) -> PluginTraits:
    """The traits ``plugin`` declares; ``NO_TRAITS`` when it declares none."""
    return plugin.traits if isinstance(plugin, DeclaresTraits) else NO_TRAITS


@runtime_checkable
class CapacityResources(Protocol):
    """A Filter plugin that holds pods to node resources says which ones: the gang
    capacity bound counts only those (and the pod count)."""

    def checks(self, resource: str) -> bool:
        """Whether Filter holds pods to ``resource`` at all (not an ignored one)."""
        ...


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    def pre_enqueue(self, pod: Pod) -> Status:
        """SUCCESS lets the pod into the active queue; anything else gates it."""
        ...


class Sortable(Protocol):
    """What QueueSort may look at in a queued entity (a pod or a pod group)."""

    @property
    def key(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def timestamp(self) -> float: ...


@runtime_checkable
class QueueSortPlugin(Protocol):
    def less(self, a: Sortable, b: Sortable) -> bool: ...


@runtime_checkable
class QueueSortKey(Protocol):
    """A QueueSort plugin may also give its order as a key: ``less(a, b)`` must be
    ``sort_key(a) < sort_key(b)``, and an entity's key must not change while it is
    queued. The active queue then compares keys (tuples, compared natively) instead
    of calling ``less`` a dozen times per pop."""

    def sort_key(self, entity: Sortable) -> tuple[Any, ...]: ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        """SKIP means this plugin's Filter is not needed for the pod."""
        ...


@runtime_checkable
class PreFilterExtensions(Protocol):
    """Optional for PreFilter plugins that keep per-pod state in CycleState (what
    other pods use, say): preemption, which simulates taking victims off a node and
    adding nominated pods, tells them so their Filter sees the node as simulated
    (upstream ``PreFilterExtensions.AddPod`` / ``RemovePod``).

    troupe runs PreFilter on the table as simulated (victims already off), so state
    a plugin derives from the NodeTable is right without them; RemovePod is for
    what it keeps elsewhere (its own caches of volumes or claims), and must ignore
    a pod its state does not count. AddPod comes for each nominated pod added to a
    node for a Filter check, on a copy of the state."""

    def add_pod(self, state: CycleState, pod: PodInfo, added: PodInfo, node: str) -> Status: ...

    def remove_pod(
        self, state: CycleState, pod: PodInfo, removed: PodInfo, node: str
    ) -> Status: ...


@runtime_checkable
class FilterPlugin(Protocol):
    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult: ...


@runtime_checkable
class FilterSlot(Protocol):
    """Optional for Filter plugins: the verdict on one node, the same as
    ``filter(...).feasible[slot]`` but cheap. The pod-group cycle uses it to re-check
    the single node a gang member was just placed on."""

    def filter_slot(self, state: CycleState, pod: PodInfo, table: NodeTable, slot: int) -> bool: ...


@runtime_checkable
class ScoreSlot(Protocol):
    """Optional for Score plugins: the raw score of one node, the same as
    ``score(..., slots=[slot])[0]`` but without array overhead; None when this case
    has no single-node form (the caller then uses ``score``). Batches use it to
    re-score the node a pod was just placed on."""

    def score_slot(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slot: int
    ) -> int | None: ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    def post_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]: ...


@runtime_checkable
class PreScorePlugin(Protocol):
    def pre_score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> Status:
        """``slots``: the feasible slots that will be scored. SKIP skips Score."""
        ...


@runtime_checkable
class ScorePlugin(Protocol):
    def score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> IntArray:
        """One score per entry of ``slots``."""
        ...


@runtime_checkable
class ScoreExtensions(Protocol):
    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> None:
        """Rescale ``scores`` in place to [MIN_NODE_SCORE, MAX_NODE_SCORE]."""
        ...


# --- placements (KEP-5732 topology-aware workload scheduling) -----------------------


@dataclass(frozen=True, slots=True)
class Placement:
    """A candidate set of nodes for a pod group: every node of one topology domain
    (``key=value``) inside its parent placement. ``nodes`` is a capacity-long mask."""

    name: str
    nodes: BoolArray
    key: str = ""
    value: str = ""


@dataclass(frozen=True, slots=True)
class PlacementAssignment:
    """What a group's attempt would do in one placement: ``scheduled`` is the group's
    members counted there (bound or assumed before, plus placed now) and
    ``requested`` the sum of what the members placed now request, by resource."""

    placement: Placement
    scheduled: int
    requested: Mapping[str, int]


@runtime_checkable
class PlacementGeneratePlugin(Protocol):
    def generate_placements(
        self, key: str, table: NodeTable, parent: Placement
    ) -> tuple[list[Placement], Status]:
        """The placements ``parent`` splits into by the node label ``key``."""
        ...


@runtime_checkable
class PlacementLevels(Protocol):
    """A placement generator that also says which levels a group gets (its own, or
    the profile's default for its API)."""

    def levels(self, api: GangApi, own: TopologyLevels) -> TopologyLevels: ...


@runtime_checkable
class PlacementScorePlugin(Protocol):
    def score_placement(self, table: NodeTable, assignment: PlacementAssignment) -> int:
        """How good ``assignment`` is (higher is better)."""
        ...


@runtime_checkable
class PlacementScoreExtensions(Protocol):
    def normalize_placement_score(self, scores: list[int]) -> Status:
        """Rescale one plugin's scores of every candidate placement in place to
        ``[MIN_NODE_SCORE, MAX_NODE_SCORE]``."""
        ...


@runtime_checkable
class PlacementFeasiblePlugin(Protocol):
    def placement_feasible(self, min_count: int, scheduled: int, remaining: int) -> Status:
        """Whether a placement can still reach the group's quorum: Unschedulable ends
        its evaluation early, Wait means not yet, success that it has."""
        ...


@runtime_checkable
class ReservePlugin(Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Must be idempotent: called on every failure after Reserve."""
        ...


@runtime_checkable
class PermitPlugin(Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        """(status, timeout seconds for WAIT)."""
        ...


@dataclass(frozen=True, slots=True)
class DisruptionPlan:
    """Victims chosen for a pod or whole pod group (KEP-5710 delayed preemption)."""

    victims: tuple[PodInfo, ...]
    nominated: dict[str, str]  # pod key -> node name
    # Candidates put back (spared) by the reprieve; groups evicted as a whole.
    reprieved: int = 0
    whole_groups: tuple[GroupRef, ...] = ()
    # Pods already terminating on the plan's nodes that it counts as gone (the
    # victims of an earlier preemption, say): not evicted again, but waited for
    # like the victims, so their room is not counted twice.
    awaited: tuple[PodInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupPreemptor:
    """A gang below its quorum, as PodGroupPostFilter sees it (KEP-5710)."""

    key: GroupKey
    priority: int
    min_count: int
    # Its members still pending, by key.
    members: Mapping[str, PodInfo]
    # Members bound or assumed before the attempt.
    already: int
    # Its members' Filters are all ones a pod landing changes only by resources and
    # host ports: a victim may be put back where it runs whenever its node keeps room
    # for what the gang placed there (KEP-5710 "in place victim reprieval").
    in_place: bool = False


GroupEvaluation = tuple[Mapping[str, str] | None, int]
"""(member key -> node of a placement reaching the quorum, or None; members placed)."""


@runtime_checkable
class PodGroupPostFilterPlugin(Protocol):
    def pod_group_post_filter(
        self, preemptor: GroupPreemptor, evaluate: Callable[[], GroupEvaluation]
    ) -> tuple[DisruptionPlan | None, Status]:
        """After a failed pod-group cycle: the victims whose eviction makes the whole
        gang fit, and where its members would go. ``evaluate`` runs the group (and
        placement) algorithm on the table as it stands.

        ``(None, SKIP)``: the plugin has nothing it could evict for this gang (no
        lower-priority pods), so preemption did not apply and nothing is reported;
        a plan without victims says the same of a gang that fits beside them."""
        ...


@runtime_checkable
class PermitDisruptionPlugin(Protocol):
    def permit_disruption(self, state: CycleState, plan: DisruptionPlan) -> Status:
        """Called once the whole pod or gang is known to fit with ``plan``'s victims
        gone; only on SUCCESS are the victims evicted (KEP-5710)."""
        ...


@runtime_checkable
class PreBindPlugin(Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


@runtime_checkable
class BindPlugin(Protocol):
    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """SKIP passes the pod to the next bind plugin."""
        ...


@runtime_checkable
class PostBindPlugin(Protocol):
    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class EnqueueExtensions(Protocol):
    def events_to_register(self) -> Sequence[ClusterEventWithHint]: ...


# --- what a plugin gets at construction ------------------------------------------


class WaitingPod(Protocol):
    @property
    def pod(self) -> PodInfo: ...
    def allow(self, plugin: str) -> None: ...
    def reject(self, plugin: str, message: str) -> None: ...


class NamespaceLister(Protocol):
    """The cluster's namespaces and their labels, as the Namespace informer last saw
    them (upstream plugins read a Namespace lister from the informer factory)."""

    @property
    def generation(self) -> int:
        """Moves whenever a namespace is added, deleted or relabelled: anything
        derived from namespace labels at one generation holds until it moves."""
        ...

    def labels_of(self, name: str) -> Mapping[str, str] | None:
        """Namespace ``name``'s labels; None when the informer has not seen it."""
        ...

    def items(self) -> Iterable[tuple[str, Mapping[str, str]]]:
        """(name, labels) of every namespace."""
        ...


class NamespaceLabels:
    """The ``NamespaceLister`` the scheduler keeps: the Namespace informer
    (``troupe.kube.namespace_informer``) writes it, plugins read it through
    ``Handle.namespaces``. The informer and the scheduling cycle share one event
    loop and a cycle never yields, so the labels cannot change under a cycle."""

    __slots__ = ("_labels", "generation")

    def __init__(self, namespaces: Iterable[Namespace] = ()) -> None:
        self._labels: dict[str, Mapping[str, str]] = {}
        self.generation = 0
        for namespace in namespaces:
            self.put(namespace)

    def put(self, namespace: Namespace) -> bool:
        """Record ``namespace``; True when that changed anything (a new namespace or
        new labels)."""
        name, labels = namespace.metadata.name, namespace.metadata.labels
        if self._labels.get(name) == labels:
            return False
        self._labels[name] = dict(labels)
        self.generation += 1
        return True

    def remove(self, name: str) -> bool:
        if self._labels.pop(name, None) is None:
            return False
        self.generation += 1
        return True

    def labels_of(self, name: str) -> Mapping[str, str] | None:
        return self._labels.get(name)

    def items(self) -> Iterable[tuple[str, Mapping[str, str]]]:
        return self._labels.items()

    def __len__(self) -> int:
        return len(self._labels)


class Handle(Protocol):
    """The framework as a plugin sees it (upstream ``framework.Handle``)."""

    @property
    def client(self) -> SchedulerClient: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def table(self) -> NodeTable: ...
    @property
    def scheduler_name(self) -> str: ...
    @property
    def groups(self) -> GroupDirectory: ...
    def get_waiting_pod(self, key: str) -> WaitingPod | None: ...
    def iterate_waiting_pods(self) -> Sequence[WaitingPod]: ...
    def run_filter_plugins_with_nominated_pods(self, pod: PodInfo, slot: int) -> Status:
        """PreFilter and Filter of ``pod`` on node ``slot`` as the table stands now,
        with the nominated pods of equal or higher priority added (upstream
        ``RunFilterPluginsWithNominatedPods``). Preemption calls it while it has
        lower-priority pods taken off the node."""
        ...

    def take_off(self, pod: PodInfo, node: str) -> None:
        """Preemption's simulation: take ``pod`` off ``node`` in the NodeTable until
        ``put_back``. While it is off, the PreFilter plugins implementing
        ``PreFilterExtensions`` are told so (RemovePod) after every PreFilter run,
        the gang algorithm's included, and by
        ``run_filter_plugins_with_nominated_pods``."""
        ...

    def put_back(self, pod: PodInfo, node: str) -> None:
        """End ``take_off``: ``pod`` is on ``node`` again."""
        ...

    def nominated_for_node(self, pod: PodInfo, node: str) -> list[PodInfo]:
        """Pods nominated to ``node`` that ``pod`` must leave room for (equal or higher
        priority, not placed yet)."""
        ...

    def pod_disruption_budgets(self) -> Sequence[PodDisruptionBudget]: ...
    @property
    def namespaces(self) -> NamespaceLister: ...


PluginFactory = Callable[[BaseModel | None, Handle], object]
"""(validated args or None, handle) -> plugin instance."""


def score_array(slots: IndexArray) -> IntArray:
    return np.zeros(len(slots), dtype=np.int64)


ScoreArray = NDArray[np.int64]
