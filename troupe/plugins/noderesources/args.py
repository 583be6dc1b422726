"""Args of NodeResourcesFit and NodeResourcesBalancedAllocation (upstream
``NodeResourcesFitArgs`` / ``NodeResourcesBalancedAllocationArgs``), with upstream's v1
defaults and validation messages.

``troupe.api.config`` validates a profile's ``pluginConfig`` into these models; the
plugins read them at construction.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from troupe.api.resources import CPU, MEMORY
from troupe.api.scoring import function_shape_errors
from troupe.api.selectors import requirement_errors

ScoringStrategyType = Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]


class _Args(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class ResourceSpec(_Args):
    name: str
    # Upstream defaults an omitted (zero) weight to 1.
    weight: int = 1

    @field_validator("weight")
    @classmethod
    def _default_zero(cls, weight: int) -> int:
        return 1 if weight == 0 else weight


def _default_resources() -> list[ResourceSpec]:
    return [ResourceSpec(name=CPU, weight=1), ResourceSpec(name=MEMORY, weight=1)]


class UtilizationShapePoint(_Args):
    utilization: int
    score: int


class RequestedToCapacityRatioParam(_Args):
    shape: list[UtilizationShapePoint]

    @model_validator(mode="after")
    def _valid_shape(self) -> RequestedToCapacityRatioParam:
        points = [(p.utilization, p.score) for p in self.shape]
        errors = function_shape_errors(points, "shape")
        if errors:
            raise ValueError("; ".join(errors))
        return self


class ScoringStrategy(_Args):
    type: ScoringStrategyType
    resources: list[ResourceSpec] = Field(default_factory=_default_resources)
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    @model_validator(mode="after")
    def _valid(self) -> ScoringStrategy:
        if not self.resources:
            # Upstream defaulting: an empty list means cpu and memory.
            object.__setattr__(self, "resources", _default_resources())
        errors = [
            f"resources[{i}].weight: Invalid value: {r.weight}: "
            f"resource weight of {r.name} not in valid range (0, 100]"
            for i, r in enumerate(self.resources)
            if not 0 < r.weight <= 100
        ]
        if self.type == "RequestedToCapacityRatio" and self.requested_to_capacity_ratio is None:
            errors.append(
                "requestedToCapacityRatio: Required value: "
                "the RequestedToCapacityRatio strategy needs a shape"
            )
        if errors:
            raise ValueError("; ".join(errors))
        return self


def _name_errors(name: str, path: str) -> list[str]:
    # requirement_errors validates its key as a qualified label name, as upstream
    # ValidateLabelName does for ignored resources; re-home the messages to ``path``.
    return [
        e.replace(f"{path}.key:", f"{path}:", 1)
        for e in requirement_errors(name, "Exists", (), path)
    ]


class NodeResourcesFitArgs(_Args):
    # Extended resources the filter does not check (e.g. ones a device plugin handles).
    ignored_resources: list[str] = Field(default_factory=list)
    # Extended-resource prefixes (the part before "/") the filter does not check.
    ignored_resource_groups: list[str] = Field(default_factory=list)
    scoring_strategy: ScoringStrategy = Field(
        default_factory=lambda: ScoringStrategy(type="LeastAllocated")
    )

    @model_validator(mode="after")
    def _valid_names(self) -> NodeResourcesFitArgs:
        errors: list[str] = []
        for i, name in enumerate(self.ignored_resources):
            errors.extend(_name_errors(name, f"ignoredResources[{i}]"))
        for i, group in enumerate(self.ignored_resource_groups):
            path = f"ignoredResourceGroups[{i}]"
            if "/" in group:
                errors.append(
                    f"{path}: Invalid value: {group!r}: resource group name can't contain '/'"
                )
            else:
                errors.extend(_name_errors(group, path))
        if errors:
            raise ValueError("; ".join(errors))
        return self


class NodeResourcesBalancedAllocationArgs(_Args):
    resources: list[ResourceSpec] = Field(default_factory=_default_resources)

    @model_validator(mode="after")
    def _valid(self) -> NodeResourcesBalancedAllocationArgs:
        if not self.resources:
            object.__setattr__(self, "resources", _default_resources())
        errors: list[str] = []
        seen: set[str] = set()
        for i, r in enumerate(self.resources):
            if r.name in seen:
                errors.append(f"resources[{i}].name: Duplicate value: {r.name!r}")
            seen.add(r.name)
            if r.weight != 1:
                errors.append(f"resources[{i}].weight: Invalid value: {r.weight}: must be 1")
        if errors:
            raise ValueError("; ".join(errors))
        return self
