"""Nodes: what an API write of a node must pass.

Its taints and schedulability must have the types a scheduler reads
(``schemas.NODE``); its ``status.capacity`` and ``status.allocatable`` are validated on
every write through the API, its status subresource included
(``quantities.validate_node``). The simulated kubelets (``troupe/sim/kubelet.py``) fill
in the rest of what a kubelet reports. Declared in ``kinds.py``.
"""

from __future__ import annotations

from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.registry.quantities import validate_node
from troupe.sim.apiserver.registry.schemas import NODE
from troupe.sim.apiserver.storage.store import Obj, Store


class NodeStrategy(GenericStrategy):
    schema = NODE

    def validate(
        self, store: Store, rt: ResourceType, obj: Obj, old: Obj | None, subresource: str | None
    ) -> None:
        validate_node(rt, obj)  # an unparsable quantity is the decoder's 400, first
        super().validate(store, rt, obj, old, subresource)
