"""The plugin, nodes and pods shared by the NodeResourcesFit tests."""

from __future__ import annotations

from troupe.api.objects import Node, Pod
from troupe.plugins.noderesources import Fit, NodeResourcesFitArgs

from tests.plugins.builders import make_node, make_pod
from tests.plugins.fakes import FakeHandle

GPU = "nvidia.com/gpu"


def fit(args: dict[str, object] | None = None) -> Fit:
    model = NodeResourcesFitArgs.model_validate(args) if args is not None else None
    return Fit(model, FakeHandle())


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: int = 110) -> Node:
    return make_node().name(name).capacity(cpu=cpu, memory=memory, pods=pods).obj()


def running(name: str, cpu: str | None = None, memory: str | None = None) -> Pod:
    return make_pod().name(name).req(cpu=cpu, memory=memory).obj()
