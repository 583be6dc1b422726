"""InterPodAffinityArgs: the plugin's ``pluginConfig`` args, validated when a profile loads.

Same names, defaults and bounds as upstream ``InterPodAffinityArgs`` /
``ValidateInterPodAffinityArgs``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class InterPodAffinityArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    # Score weight of a placed pod's *required* affinity term that the incoming pod
    # matches; 0 turns that contribution off.
    hard_pod_affinity_weight: int = Field(default=1, ge=0, le=100)
    # Skip placed pods' preferred terms unless the incoming pod has preferred terms
    # itself (kubernetes#114393, a throughput option).
    ignore_preferred_terms_of_existing_pods: bool = False
