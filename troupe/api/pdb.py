"""PodDisruptionBudget (``policy/v1``): the fields preemption reads.

The scheduler's PDB informer parses objects into ``PodDisruptionBudget``; the
DefaultPreemption plugin counts, per candidate node, how many victims would take a
budget below zero (upstream ``filterPodsWithPDBViolation``). Only the selector and
the status the disruption controller maintains matter: ``disruptionsAllowed`` and
``disruptedPods`` (pods whose eviction the API server already granted).
"""

from __future__ import annotations

from pydantic import Field

from troupe.api.objects import KubeModel, KubeObject, LabelSelector, ObjectMeta, Pod, kube_model
from troupe.api.selectors import label_selector_matches


@kube_model
class PodDisruptionBudgetSpec(KubeModel):
    selector: LabelSelector | None = None


@kube_model
class PodDisruptionBudgetStatus(KubeModel):
    disruptions_allowed: int = 0
    # Pod name -> time the eviction was granted.
    disrupted_pods: dict[str, str] = Field(default_factory=dict)


@kube_model
class PodDisruptionBudget(KubeObject):
    api_version: str = "policy/v1"
    kind: str = "PodDisruptionBudget"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = Field(default_factory=PodDisruptionBudgetStatus)

    def covers(self, pod: Pod) -> bool:
        """Whether this budget selects ``pod``. Upstream preemption: another namespace,
        a missing or empty selector, or an invalid one selects nothing."""
        if pod.metadata.namespace != self.metadata.namespace or not pod.metadata.labels:
            return False
        selector = self.spec.selector
        if selector is None or not (selector.match_labels or selector.match_expressions):
            return False
        return label_selector_matches(selector, pod.metadata.labels)
