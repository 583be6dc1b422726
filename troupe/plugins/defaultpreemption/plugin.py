"""DefaultPreemption: a PostFilter plugin that frees a node for a pod that fits nowhere.

Upstream ``defaultpreemption`` + ``framework/preemption`` for single pods:

1. ``eligible``: a pod with ``preemptionPolicy: Never`` never preempts; a pod whose
   nominated node already has a lower-priority pod terminating because of
   preemption waits for it (unless Filter now calls that node unresolvable); a gang
   member never preempts pod by pod (below).
2. potential nodes: the ones Filter rejected as Unschedulable, never those it called
   UnschedulableAndUnresolvable (preemption cannot fix a taint or an affinity);
3. ``candidates.dry_run`` selects victims on them (``victims``) from a random
   offset until ``DefaultPreemptionArgs.num_candidates`` are found;
4. ``candidates.pick_one_node`` picks the node.

The plugin decides and changes nothing: it returns ``PostFilterResult(node,
victims)`` and the scheduler (``troupe.scheduler.cycle.evictions``) nominates the pod,
marks each victim with a ``DisruptionTarget`` condition, deletes it and records a
``Preempted`` event. When nothing helps, the status carries upstream's
``preemption: 0/N nodes are available: ...`` message, which the FitError appends,
and the result clears an earlier nomination.

Gang members (a pod whose group has a gang policy, or whose group is not known yet)
are not eligible, silently (the gang's own message says why it waits): KEP-5710
chooses victims for a whole gang and evicts them only once the whole gang is known
to fit; evicting for one member of a gang that then does not fit is exactly what it
forbids.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np

from troupe.api.cycle import CycleState
from troupe.api.framework import (
    Diagnosis,
    DisruptionPlan,
    GroupEvaluation,
    GroupPreemptor,
    Handle,
    PluginTraits,
    PostFilterResult,
)
from troupe.api.gangs import group_ref_of
from troupe.api.nodetable import NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.preemption import NOT_ELIGIBLE_NEVER, terminating_by_preemption
from troupe.api.status import SUCCESS, Code, Status
from troupe.plugins.defaultpreemption.args import DefaultPreemptionArgs
from troupe.plugins.defaultpreemption.candidates import dry_run, pick_one_node
from troupe.plugins.defaultpreemption.group import select_group_victims

NOT_HELPFUL = "Preemption is not helpful for scheduling"
TERMINATING = "not eligible due to a terminating pod on the nominated node."


def nodes_message(num_nodes: int, statuses: Sequence[Status], absent: int) -> str:
    """FitError text over per-node statuses; ``absent`` nodes were not examined."""
    counts: dict[str, int] = {}
    for status in statuses:
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    if absent:
        counts[NOT_HELPFUL] = counts.get(NOT_HELPFUL, 0) + absent
    reasons = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"0/{num_nodes} nodes are available: {', '.join(reasons)}."


class DefaultPreemption:
    name = "DefaultPreemption"
    traits = PluginTraits(preemption=True)

    def __init__(self, args: DefaultPreemptionArgs | None, handle: Handle) -> None:
        self.args = args if args is not None else DefaultPreemptionArgs()
        self._handle = handle
        # Where the dry run starts (upstream draws a random offset per attempt).
        self.rng = random.Random(0)

    def post_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        if self.gang_member(pod):
            # Silent: the gang's own FailedScheduling message says why it waits.
            return None, Status.unschedulable()
        why = self.not_eligible(pod, table, diagnosis)
        if why:
            return None, Status.unschedulable("preemption: " + why)
        potential = table.present.copy()
        if diagnosis.unresolvable is not None:
            potential &= ~diagnosis.unresolvable
        slots = [int(s) for s in np.flatnonzero(potential)]
        pdbs = self._handle.pod_disruption_budgets() if slots else ()
        want = self.args.num_candidates(len(slots))
        offset = self.rng.randrange(len(slots)) if slots else 0
        run = dry_run(self._handle, pod, slots, pdbs, offset, want)
        if not run.candidates:
            errors = [s for s in run.statuses.values() if s.code is Code.ERROR]
            if errors:
                return None, errors[0]
            absent = table.size - len(run.statuses)
            message = nodes_message(table.size, list(run.statuses.values()), absent)
            # Clears the pod's nomination, if it had one.
            return PostFilterResult(""), Status.unschedulable("preemption: " + message)
        best = pick_one_node(run.candidates)
        return PostFilterResult(best.node, best.victims), SUCCESS

    def pod_group_post_filter(
        self, preemptor: GroupPreemptor, evaluate: Callable[[], GroupEvaluation]
    ) -> tuple[DisruptionPlan | None, Status]:
        """Victims for a whole gang below its quorum (``group.py``)."""
        return select_group_victims(self._handle, preemptor, evaluate)

    def gang_member(self, pod: PodInfo) -> bool:
        """A member of a gang-policy group, or of a group not known yet."""
        ref = group_ref_of(pod.pod)
        if ref is None:
            return False
        policy = self._handle.groups.policy(ref)
        return policy is None or policy.gang

    def not_eligible(self, pod: PodInfo, table: NodeTable, diagnosis: Diagnosis) -> str:
        """Why ``pod`` may not preempt now; "" when it may (upstream
        ``PodEligibleToPreemptOthers``)."""
        spec = pod.pod.spec
        if spec.preemption_policy == "Never":
            return NOT_ELIGIBLE_NEVER
        nominated = pod.pod.status.nominated_node_name
        slot = table.slot(nominated) if nominated else None
        if slot is None:
            return ""
        if diagnosis.unresolvable is not None and diagnosis.unresolvable[slot]:
            # Filter now calls the nominated node hopeless: look elsewhere.
            return ""
        for other in table.pods[slot].values():
            if other.priority < pod.priority and terminating_by_preemption(other.pod):
                return TERMINATING
        return ""
