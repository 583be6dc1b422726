"""VolumeBindingArgs: the plugin's ``pluginConfig`` args (upstream
``VolumeBindingArgs``), with upstream's v1 defaults and validation.

``bindTimeoutSeconds`` (default 600) bounds how long PreBind waits for the PV
controller; ``shape`` maps a class's utilization to a score for
StorageCapacityScoring (on by default since Kubernetes 1.33's beta): when omitted or
empty it is upstream's default ``{0: 10, 100: 0}``, which prefers the nodes with the
most free capacity (and, for static PVs, PVs much larger than the claim).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from troupe.api.scoring import MAX_CUSTOM_PRIORITY_SCORE, FunctionShape, function_shape_errors

DEFAULT_BIND_TIMEOUT_SECONDS = 600


class _Args(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class UtilizationShapePoint(_Args):
    utilization: int
    score: int


def _default_shape() -> list[UtilizationShapePoint]:
    return [
        UtilizationShapePoint(utilization=0, score=MAX_CUSTOM_PRIORITY_SCORE),
        UtilizationShapePoint(utilization=100, score=0),
    ]


class VolumeBindingArgs(_Args):
    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    shape: list[UtilizationShapePoint] = Field(default_factory=_default_shape)

    @model_validator(mode="after")
    def _valid(self) -> VolumeBindingArgs:
        if not self.shape:
            # Upstream defaulting: an empty shape is the default shape.
            object.__setattr__(self, "shape", _default_shape())
        errors = []
        if self.bind_timeout_seconds < 0:
            errors.append(
                f"bindTimeoutSeconds: Invalid value: {self.bind_timeout_seconds}: "
                "invalid BindTimeoutSeconds, should not be a negative value"
            )
        errors.extend(
            function_shape_errors([(p.utilization, p.score) for p in self.shape], "shape")
        )
        if errors:
            raise ValueError("; ".join(errors))
        return self

    def function_shape(self) -> FunctionShape:
        """The shape with scores scaled to node scores (0..100)."""
        return FunctionShape.of([(p.utilization, p.score) for p in self.shape])
