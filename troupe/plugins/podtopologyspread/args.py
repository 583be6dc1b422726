"""PodTopologySpreadArgs: the plugin's ``pluginConfig`` args, validated when a profile loads.

Field names, defaults and checks follow upstream ``PodTopologySpreadArgs`` and
``ValidatePodTopologySpreadArgs``, with one difference: ``defaultingType`` defaults to
``List``. Upstream's ``System`` defaults (hostname maxSkew 3, zone maxSkew 5, both
ScheduleAnyway) select pods through the Services, ReplicaSets and StatefulSets that
own them, which needs listers troupe does not run; ``System`` is accepted and applies
no default constraints. ``List`` defaults apply as described in ``constraints.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from troupe.api.objects import TopologySpreadConstraint


class PodTopologySpreadArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    default_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)
    defaulting_type: Literal["System", "List"] = "List"

    @model_validator(mode="after")
    def _check(self) -> PodTopologySpreadArgs:
        problems: list[str] = []
        if self.defaulting_type == "System" and self.default_constraints:
            problems.append(
                'defaultingType: Invalid value: "System": when .defaultConstraints are not empty'
            )
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(self.default_constraints):
            path = f"defaultConstraints[{i}]"
            if c.max_skew <= 0:
                problems.append(f"{path}.maxSkew: Invalid value: {c.max_skew}: must be > 0")
            if not c.topology_key:
                problems.append(f"{path}.topologyKey: Required value: can not be empty")
            if c.label_selector is not None:
                problems.append(
                    f"{path}.labelSelector: Forbidden: constraint must not define a selector, "
                    "as they deduced for each pod"
                )
            if c.min_domains is not None and c.min_domains <= 0:
                problems.append(f"{path}.minDomains: Invalid value: {c.min_domains}: must be > 0")
            pair = (c.topology_key, c.when_unsatisfiable)
            if pair in seen:
                problems.append(
                    f'{path}: Duplicate value: {{"{c.topology_key}", "{c.when_unsatisfiable}"}}'
                )
            seen.add(pair)
        if problems:
            raise ValueError("; ".join(problems))
        return self
