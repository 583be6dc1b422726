"""NodeAffinityArgs: the plugin's ``pluginConfig`` args (upstream ``NodeAffinityArgs``).

Validated by ``troupe.api.config`` when a profile loads: a term that would not parse
is an error naming its field, as upstream ``ValidateNodeAffinityArgs``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

from troupe.api.objects import NodeAffinity
from troupe.api.selectors import node_selector_term_errors, validate_node_selector


class NodeAffinityArgs(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )

    # Applied to every pod of the profile, in addition to the pod's own affinity.
    added_affinity: NodeAffinity | None = None

    @model_validator(mode="after")
    def _terms_parse(self) -> NodeAffinityArgs:
        added = self.added_affinity
        if added is None:
            return self
        errors: list[str] = []
        required = added.required_during_scheduling_ignored_during_execution
        if required is not None:
            errors.extend(
                validate_node_selector(
                    required, "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                )
            )
        for i, term in enumerate(added.preferred_during_scheduling_ignored_during_execution):
            path = f"addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            errors.extend(node_selector_term_errors(term.preference, f"{path}.preference"))
        if errors:
            raise ValueError("; ".join(errors))
        return self
