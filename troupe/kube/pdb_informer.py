"""The PodDisruptionBudget informer: policy/v1 PDBs of all namespaces into a dict.

The daemon adds it to its ``SharedInformers`` before ``start``; the store it fills
is the scheduler's ``pdbs`` mapping, which DefaultPreemption reads through
``Handle.pod_disruption_budgets`` to count the budgets each candidate would break
(upstream's preemption evaluator uses a PDB lister the same way). A budget change
moves no pod in the queue: preemption reads the budgets when it runs.
"""

from __future__ import annotations

import random
from typing import Final

from troupe.api.clock import Clock
from troupe.api.pdb import PodDisruptionBudget
from troupe.kube.informer import Informer, InformerConfig, object_key
from troupe.kube.transport import Transport

PDBS_PATH: Final = "/apis/policy/v1/poddisruptionbudgets"


def pdb_informer(
    transport: Transport,
    clock: Clock,
    store: dict[str, PodDisruptionBudget],
    *,
    config: InformerConfig | None = None,
    rng: random.Random | None = None,
) -> Informer[PodDisruptionBudget]:
    """An informer keeping ``store`` (``namespace/name`` -> budget) in step."""

    def put(pdb: PodDisruptionBudget) -> None:
        store[object_key(pdb)] = pdb

    def updated(old: PodDisruptionBudget, new: PodDisruptionBudget) -> None:
        put(new)

    def deleted(pdb: PodDisruptionBudget) -> None:
        store.pop(object_key(pdb), None)

    return Informer(
        transport,
        PDBS_PATH,
        PodDisruptionBudget,
        clock,
        on_add=put,
        on_update=updated,
        on_delete=deleted,
        config=config,
        rng=rng,
        name="poddisruptionbudgets.policy",
    )
