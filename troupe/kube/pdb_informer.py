"""The PodDisruptionBudget informer: policy/v1 PDBs of all namespaces into a store.

The daemon adds it to its ``SharedInformers`` before ``start``; the store it fills
is the scheduler's ``PodDisruptionBudgets`` lister, which DefaultPreemption reads through
``Handle.pod_disruption_budgets`` to count the budgets each candidate would break
(upstream's preemption evaluator uses a PDB lister the same way). A budget change
moves no pod in the queue: preemption reads the budgets when it runs.
"""

from __future__ import annotations

import random
from typing import Final

from troupe.api.clock import Clock
from troupe.api.pdb import PodDisruptionBudget, PodDisruptionBudgets
from troupe.kube.informer import Informer, InformerConfig
from troupe.kube.transport import Transport

PDBS_PATH: Final = "/apis/policy/v1/poddisruptionbudgets"


def pdb_informer(
    transport: Transport,
    clock: Clock,
    store: PodDisruptionBudgets,
    *,
    config: InformerConfig | None = None,
    rng: random.Random | None = None,
) -> Informer[PodDisruptionBudget]:
    """An informer keeping ``store`` in step."""

    def updated(old: PodDisruptionBudget, new: PodDisruptionBudget) -> None:
        store.put(new)

    return Informer(
        transport,
        PDBS_PATH,
        PodDisruptionBudget,
        clock,
        on_add=store.put,
        on_update=updated,
        on_delete=store.remove,
        config=config,
        rng=rng,
        name="poddisruptionbudgets.policy",
    )
