"""PriorityClasses and PodDisruptionBudgets: the types a scheduler reads of them.

A PriorityClass's ``value``, ``globalDefault`` and ``preemptionPolicy`` and a PDB's
``selector`` must decode into their Go types (``schemas.py``) on a write through the
API, so the Priority admission of pods and the disruption controller never meet a
value of the wrong type from a client. Declared in ``kinds.py``.
"""

from __future__ import annotations

from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.registry.schemas import POD_DISRUPTION_BUDGET, PRIORITY_CLASS


class PriorityClassStrategy(GenericStrategy):
    schema = PRIORITY_CLASS


class DisruptionBudgetStrategy(GenericStrategy):
    schema = POD_DISRUPTION_BUDGET
