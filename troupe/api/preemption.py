"""What preemption writes and says, shared by the plugins that decide it and the
engine that carries it out.

DefaultPreemption (``troupe.plugins.defaultpreemption``) chooses victims; the engine
(``troupe.scheduler.cycle.evictions``, ``troupe.scheduler.gangs``) marks them
``DisruptionTarget=True`` with reason ``PreemptionByScheduler`` and evicts them, and
tells a gang that may not preempt why. Upstream keeps these in
``k8s.io/api/core/v1`` (the condition) and the preemption evaluator (the message).
"""

from __future__ import annotations

from typing import Final

from troupe.api.objects import Pod

# The pod condition a preemption victim gets before it is deleted (upstream
# ``v1.DisruptionTarget`` with reason ``v1.PodReasonPreemptionByScheduler``).
DISRUPTION_TARGET: Final = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"
# Why a preemptor with ``preemptionPolicy: Never`` evicts nothing (upstream
# ``PodEligibleToPreemptOthers``).
NOT_ELIGIBLE_NEVER: Final = "not eligible due to preemptionPolicy=Never."


def terminating_by_preemption(pod: Pod) -> bool:
    """Being deleted, and marked ``DisruptionTarget=True`` by a scheduler's preemption
    (upstream ``podTerminatingByPreemption``)."""
    if pod.metadata.deletion_timestamp is None:
        return False
    for condition in pod.status.conditions:
        if condition.type == DISRUPTION_TARGET:
            return condition.status == "True" and condition.reason == PREEMPTION_BY_SCHEDULER
    return False
