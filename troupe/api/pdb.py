"""PodDisruptionBudget (``policy/v1``): the fields preemption reads.

The scheduler's PDB informer parses objects into ``PodDisruptionBudget``; the
DefaultPreemption plugin counts, per candidate node, how many victims would take a
budget below zero (upstream ``filterPodsWithPDBViolation``). Only the selector and
the status the disruption controller maintains matter: ``disruptionsAllowed`` and
``disruptedPods`` (pods whose eviction the API server already granted).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

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


class PdbLister(Protocol):
    """The cluster's PodDisruptionBudgets as the PDB informer last saw them (upstream
    preemption reads a PDB lister from the informer factory)."""

    def list(self) -> Sequence[PodDisruptionBudget]: ...

    def __contains__(self, key: object) -> bool:
        """Whether the budget ``namespace/name`` is known."""
        ...


class PodDisruptionBudgets:
    """The ``PdbLister`` the scheduler keeps: the PDB informer
    (``troupe.kube.pdb_informer``) writes it, preemption reads it through
    ``Handle.pod_disruption_budgets``."""

    __slots__ = ("_budgets",)

    def __init__(self, budgets: Iterable[PodDisruptionBudget] = ()) -> None:
        self._budgets: dict[str, PodDisruptionBudget] = {}
        for pdb in budgets:
            self.put(pdb)

    def put(self, pdb: PodDisruptionBudget) -> None:
        self._budgets[f"{pdb.metadata.namespace}/{pdb.metadata.name}"] = pdb

    def remove(self, pdb: PodDisruptionBudget) -> None:
        self._budgets.pop(f"{pdb.metadata.namespace}/{pdb.metadata.name}", None)

    def list(self) -> Sequence[PodDisruptionBudget]:
        return list(self._budgets.values())

    def __contains__(self, key: object) -> bool:
        return key in self._budgets

    def __len__(self) -> int:
        return len(self._budgets)
