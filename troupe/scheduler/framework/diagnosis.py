"""What the PreFilter and Filter runners return, and the diagnosis built from it.

``Framework.run_pre_filter`` merges the PreFilter node restrictions into a
``MergedPreFilterResult``; ``Framework.run_filter`` returns a ``FilterOutcome``.
When no node fits, the pod cycle (``troupe.scheduler.cycle.algorithm``) turns them
into a ``Diagnosis`` with ``diagnose`` or ``diagnose_pre_filter``: per reason, how
many nodes each plugin was first to reject (upstream ``Diagnosis`` / ``FitError``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from troupe.api.framework import Diagnosis, FilterResult, PreFilterResult
from troupe.api.nodetable import BoolArray
from troupe.api.status import SUCCESS, Code, Status
from troupe.scheduler.framework.messages import pre_filter_excluded_reason


def no_common_node(plugins: Sequence[str]) -> str:
    """Upstream RunPreFilterPlugins' message when the PreFilter results of
    ``plugins`` (sorted) have no node in common."""
    if len(plugins) == 1:
        return f"node(s) didn't satisfy plugin {plugins[0]}"
    return f"node(s) didn't satisfy plugin(s) [{' '.join(plugins)}] simultaneously"


@dataclass(frozen=True, slots=True)
class MergedPreFilterResult(PreFilterResult):
    """The intersection of the PreFilter results of one cycle, with the plugins
    that restricted it (upstream's ``pluginsWithNodes``, sorted): the nodes it
    leaves out are theirs to explain in the diagnosis."""

    plugins: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FilterOutcome:
    """The result of the Filter point over all candidate slots."""

    feasible: BoolArray
    # (plugin, its result, the slots it was first to reject): for the diagnosis.
    rejected_by: tuple[tuple[str, FilterResult, BoolArray], ...]
    status: Status = SUCCESS


def diagnose_pre_filter(
    status: Status, pre: MergedPreFilterResult | None, num_nodes: int
) -> Diagnosis:
    """Why no node was even filtered: the rejecting plugin, or every plugin whose
    node sets did not intersect (``pre``); the message replaces the per-node
    counts (upstream FitError.PreFilterMsg)."""
    plugins = set(pre.plugins) if pre is not None else set()
    if status.plugin:
        plugins.add(status.plugin)
    return Diagnosis(
        num_nodes=num_nodes,
        unschedulable_plugins=plugins,
        pre_filter_message=status.message,
        plugin_counts={f"PreFilter/{p}": num_nodes for p in sorted(plugins)},
    )


def diagnose(
    outcome: FilterOutcome,
    num_nodes: int,
    left_out: BoolArray | None = None,
    pre: MergedPreFilterResult | None = None,
) -> Diagnosis:
    """Count, per reason, the nodes each plugin was first to reject.

    ``left_out``: the nodes the PreFilter result ``pre`` excluded. As upstream's
    findNodesThatFitPod, they count as UnschedulableAndUnresolvable with
    ``node(s) didn't satisfy plugin(s) [<plugins>]``, and the restricting plugins
    join the rejectors (their queueing hints release the pod)."""
    diagnosis = Diagnosis(num_nodes=num_nodes)
    counts = diagnosis.reason_counts
    unresolvable: BoolArray | None = None
    if left_out is not None and pre is not None:
        n = int(np.count_nonzero(left_out))
        if n:
            counts[pre_filter_excluded_reason(pre.plugins)] = n
            unresolvable = left_out
            for plugin in pre.plugins:
                diagnosis.plugin_counts[f"PreFilter/{plugin}"] = n
        diagnosis.unschedulable_plugins.update(pre.plugins)
    for name, result, newly in outcome.rejected_by:
        diagnosis.unschedulable_plugins.add(name)
        first = int(np.count_nonzero(newly))
        if first:
            diagnosis.plugin_counts[f"Filter/{name}"] = first
        for rejection in result.explain():
            hit = rejection.nodes & newly
            n = int(np.count_nonzero(hit))
            if n:
                counts[rejection.reason] = counts.get(rejection.reason, 0) + n
                if rejection.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    unresolvable = hit if unresolvable is None else unresolvable | hit
    diagnosis.unresolvable = unresolvable
    return diagnosis
