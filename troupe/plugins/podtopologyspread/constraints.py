"""A pod's topology spread constraints, compiled once per pod, and the node masks they use.

Called by the plugin (``plugin.py``) in PreFilter/PreScore and by its queueing hints.
Follows upstream ``common.go``:

- ``filterTopologySpreadConstraints``: keep the constraints of one action
  (DoNotSchedule for Filter, ScheduleAnyway for Score); ``minDomains`` defaults to 1,
  ``nodeAffinityPolicy`` to Honor, ``nodeTaintsPolicy`` to Ignore; ``matchLabelKeys``
  are ANDed into the selector as ``key In (pod's value)`` for keys the pod carries
  (a nil selector stays nil: it matches nothing either way).
- ``countPodsMatchSelector``: only pods in the incoming pod's namespace, never
  terminating ones (kubernetes#87621), and an *empty* selector counts no pod although
  the pod still matches it itself (``selector.Empty()``), so such a constraint never
  rejects.
- Default constraints (``defaultConstraints`` with ``defaultingType: List``) apply to
  pods without constraints of their own. Upstream takes their selector from the
  Services, ReplicationControllers, ReplicaSets and StatefulSets selecting the pod;
  troupe has no such listers and uses, for a pod whose controller is a ReplicaSet,
  ReplicationController or StatefulSet, a selector of the pod's own labels minus the
  per-pod/per-revision ones (``_PER_POD_LABELS``). Other pods get no default constraints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

import numpy as np

from troupe.api.nodetable import BoolArray, NodeTable
from troupe.api.objects import (
    LabelSelector,
    LabelSelectorRequirement,
    Pod,
    TopologySpreadConstraint,
)
from troupe.api.podcounts import PodClause, PodMatcher
from troupe.api.selectors import find_untolerated_taint, label_selector_matches

Action = Literal["DoNotSchedule", "ScheduleAnyway"]

HOSTNAME_KEY: Final = "kubernetes.io/hostname"
# Effects a "Honor" nodeTaintsPolicy looks at (upstream DoNotScheduleTaintsFilterFunc).
_DO_NOT_SCHEDULE_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})
_DEFAULTED_OWNERS: Final = frozenset({"ReplicaSet", "ReplicationController", "StatefulSet"})
_PER_POD_LABELS: Final = frozenset(
    {
        "statefulset.kubernetes.io/pod-name",
        "apps.kubernetes.io/pod-index",
        "controller-revision-hash",
    }
)


@dataclass(frozen=True, slots=True)
class Constraint:
    """One spread constraint of one pod, ready to evaluate."""

    max_skew: int
    topology_key: str
    # Pods counted in a domain; None when the selector is nil or empty (counts 0).
    matcher: PodMatcher | None
    # Whether the incoming pod matches its own selector (upstream selfMatchNum).
    self_match: bool
    min_domains: int
    honor_node_affinity: bool
    honor_node_taints: bool
    selector: LabelSelector | None = field(compare=False, repr=False)

    def selects(self, labels: Mapping[str, str]) -> bool:
        return label_selector_matches(self.selector, labels)


def merged_selector(
    selector: LabelSelector | None, match_label_keys: Sequence[str], labels: Mapping[str, str]
) -> LabelSelector | None:
    """``selector`` AND ``key In (labels[key])`` for each matchLabelKey the pod has
    (upstream ``mergeLabelSetWithSelector``). Requirements are added, never replaced,
    so a clash with the selector's own matchLabels selects nothing, as upstream."""
    if selector is None:
        return None
    extra = [
        LabelSelectorRequirement(key=k, operator="In", values=[labels[k]])
        for k in match_label_keys
        if k in labels
    ]
    if not extra:
        return selector
    return LabelSelector(
        match_labels=dict(selector.match_labels),
        match_expressions=[*selector.match_expressions, *extra],
    )


def default_selector(pod: Pod) -> LabelSelector | None:
    """The selector default constraints use for ``pod`` (see the module docstring)."""
    owned = any(
        ref.controller and ref.kind in _DEFAULTED_OWNERS for ref in pod.metadata.owner_references
    )
    if not owned:
        return None
    labels = {k: v for k, v in pod.metadata.labels.items() if k not in _PER_POD_LABELS}
    return LabelSelector(match_labels=labels) if labels else None


def _compile(c: TopologySpreadConstraint, selector: LabelSelector | None, pod: Pod) -> Constraint:
    labels = pod.metadata.labels
    merged = merged_selector(selector, c.match_label_keys, labels)
    empty = merged is not None and not merged.match_labels and not merged.match_expressions
    matcher = (
        None
        if merged is None or empty
        else PodMatcher(
            (PodClause.of(frozenset({pod.metadata.namespace}), merged),), skip_terminating=True
        )
    )
    return Constraint(
        max_skew=c.max_skew,
        topology_key=c.topology_key,
        matcher=matcher,
        self_match=label_selector_matches(merged, labels),
        min_domains=c.min_domains if c.min_domains is not None else 1,
        honor_node_affinity=(c.node_affinity_policy or "Honor") == "Honor",
        honor_node_taints=(c.node_taints_policy or "Ignore") == "Honor",
        selector=merged,
    )


def pod_constraints(
    pod: Pod, action: Action, defaults: Sequence[TopologySpreadConstraint]
) -> tuple[Constraint, ...]:
    """The pod's constraints for ``action``, or the default ones when it has none."""
    own = pod.spec.topology_spread_constraints
    if own:
        return tuple(
            _compile(c, c.label_selector, pod) for c in own if c.when_unsatisfiable == action
        )
    chosen = [c for c in defaults if c.when_unsatisfiable == action]
    if not chosen:
        return ()
    selector = default_selector(pod)
    if selector is None:
        return ()
    return tuple(_compile(c, selector, pod) for c in chosen)


# --- node masks ----------------------------------------------------------------------


def has_all_keys(table: NodeTable, constraints: Sequence[Constraint]) -> BoolArray:
    """Nodes labelled with every constraint's topology key (upstream
    ``nodeLabelsMatchSpreadConstraints``); only they hold domains."""
    mask = table.present.copy()
    for c in constraints:
        column = table.labels.get(c.topology_key)
        if column is None:
            return np.zeros(table.capacity, dtype=bool)
        mask &= column >= 0
    return mask


def required_affinity_mask(table: NodeTable, pod: Pod) -> BoolArray:
    """Nodes matching the pod's nodeSelector and required node affinity (upstream
    ``GetRequiredNodeAffinity``), for ``nodeAffinityPolicy: Honor``."""
    mask = table.present
    for key, value in pod.spec.node_selector.items():
        mask = mask & table.label_mask(key, _equals(value))
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity else None
    required = (
        node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    )
    if required is not None:
        mask = mask & table.node_selector_mask(required)
    return mask


def _equals(want: str) -> Callable[[str | None], bool]:
    def matches(value: str | None) -> bool:
        return value == want

    return matches


def tolerated_mask(table: NodeTable, pod: Pod) -> BoolArray:
    """Nodes without a NoSchedule/NoExecute taint the pod does not tolerate, for
    ``nodeTaintsPolicy: Honor``."""
    mask = table.present.copy()
    tolerations = pod.spec.tolerations
    for tid in table.live_taint_ids():
        taint = table.taint_list[tid]
        if find_untolerated_taint((taint,), tolerations, _DO_NOT_SCHEDULE_EFFECTS) is not None:
            mask &= ~table.taints[tid]
    return mask


class InclusionMasks:
    """The node masks a pod's constraints need, each computed at most once per cycle."""

    __slots__ = ("_affinity", "_pod", "_table", "_tolerated", "all_keys")

    def __init__(self, table: NodeTable, pod: Pod, constraints: Sequence[Constraint]) -> None:
        self._table = table
        self._pod = pod
        self._affinity: BoolArray | None = None
        self._tolerated: BoolArray | None = None
        self.all_keys = has_all_keys(table, constraints)

    def eligible(self, c: Constraint) -> BoolArray:
        """Nodes whose pods count for ``c`` (upstream ``matchNodeInclusionPolicies``
        plus the all-keys rule)."""
        mask = self.all_keys
        if c.honor_node_affinity:
            if self._affinity is None:
                self._affinity = required_affinity_mask(self._table, self._pod)
            mask = mask & self._affinity
        if c.honor_node_taints:
            if self._tolerated is None:
                self._tolerated = tolerated_mask(self._table, self._pod)
            mask = mask & self._tolerated
        return mask
