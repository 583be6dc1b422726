"""TopologyPlacement: the placements a parent placement splits into by a node label.

Upstream's plugin (pkg/scheduler/framework/plugins/topologyplacement) gives one
placement per distinct value of the label among the parent's nodes, in value order,
and answers Unschedulable "no nodes found with topology label '<key>'" when no node of
the parent has it. The same here, over the NodeTable's label column: the masks are
kept per (label, parent) until the node set or a label changes (``node_generation``),
so a thousand gangs asking for racks split the cluster once.

troupe's addition: per-API defaults (``args.defaults``), which topology a group gets
when its own object asks for none (docs/topology.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from troupe.api.events import Action, ClusterEvent, ClusterEventWithHint, Resource
from troupe.api.framework import Handle, Placement
from troupe.api.gangs import GangApi
from troupe.api.nodetable import NodeTable
from troupe.api.selectors import qualified_name_errors
from troupe.api.status import Status
from troupe.api.topology import TopologyLevels

_APIS = tuple(api.value for api in GangApi)

# A node added, or labelled into a domain, may give a gang its domain.
NODE_ADD_OR_LABEL_CHANGE = ClusterEvent(
    Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL, "NodeAddOrLabelUpdate"
)


class TopologyDefault(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )

    # The gang API whose groups get these levels (``scheduling.x-k8s.io/v1alpha1``,
    # ``scheduling.k8s.io/v1alpha1`` or ``scheduling.k8s.io/v1alpha2``).
    api: str
    required: str = ""
    preferred: list[str] = Field(default_factory=list)

    @field_validator("api")
    @classmethod
    def _known_api(cls, value: str) -> str:
        if value not in _APIS:
            raise ValueError(f"unsupported value {value!r}: supported values: {', '.join(_APIS)}")
        return value

    @model_validator(mode="after")
    def _keys(self) -> TopologyDefault:
        errors: list[str] = []
        if self.required:
            errors += qualified_name_errors(self.required, "required")
        for i, key in enumerate(self.preferred):
            errors += qualified_name_errors(key, f"preferred[{i}]")
        keys = [k for k in (self.required, *self.preferred) if k]
        if len(set(keys)) != len(keys):
            errors.append("preferred: a label is named twice (or as the required level too)")
        if errors:
            raise ValueError("; ".join(errors))
        return self


class TopologyPlacementArgs(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )

    defaults: list[TopologyDefault] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_per_api(self) -> TopologyPlacementArgs:
        apis = [d.api for d in self.defaults]
        for api in sorted(set(apis)):
            if apis.count(api) > 1:
                raise ValueError(f"defaults: api {api!r} is given more than once")
        return self


class TopologyPlacement:
    name = "TopologyPlacement"

    def __init__(self, args: TopologyPlacementArgs | None, handle: Handle) -> None:
        del handle
        args = args or TopologyPlacementArgs()
        self._defaults = {
            GangApi(d.api): TopologyLevels(d.required, tuple(d.preferred)) for d in args.defaults
        }
        self._cache: dict[tuple[str, str], list[Placement]] = {}
        self._generation = -1

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (ClusterEventWithHint(NODE_ADD_OR_LABEL_CHANGE),)

    def levels(self, api: GangApi, own: TopologyLevels) -> TopologyLevels:
        """The group's own levels, else the profile's default for its API."""
        if own:
            return own
        return self._defaults.get(api, own)

    def generate_placements(
        self, key: str, table: NodeTable, parent: Placement
    ) -> tuple[list[Placement], Status]:
        if table.node_generation != self._generation:
            self._cache.clear()
            self._generation = table.node_generation
        cached = self._cache.get((key, parent.name))
        if cached is None:
            cached = self._split(key, table, parent)
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[(key, parent.name)] = cached
        if not cached:
            return [], Status.unschedulable(
                f"no nodes found with topology label '{key}'", plugin=self.name
            )
        return cached, Status()

    @staticmethod
    def _split(key: str, table: NodeTable, parent: Placement) -> list[Placement]:
        column = table.labels.get(key)
        if column is None:
            return []
        within = parent.nodes & table.present & (column >= 0)
        ids = np.unique(column[within])
        vocab = table.label_values[key]
        out = []
        for lid in sorted(ids.tolist(), key=lambda i: vocab[i]):
            value = vocab[lid]
            name = f"{parent.name}/{key}={value}" if parent.name else f"{key}={value}"
            out.append(Placement(name, within & (column == lid), key, value))
        return out
