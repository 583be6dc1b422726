"""CoschedulingArgs: the plugin's ``pluginConfig`` args (scheduler-plugins
``CoschedulingArgs``), with upstream's v1 defaults and validation.

``troupe.api.config`` validates a profile's ``pluginConfig`` entry for ``Coscheduling``
into this model, so a KubeSchedulerConfiguration written for scheduler-plugins loads
unchanged; the plugin reads it at construction.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic.alias_generators import to_camel


class CoschedulingArgs(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )

    # How long a member may wait at Permit for its gang's quorum, unless the group
    # sets its own ``scheduleTimeoutSeconds``.
    permit_waiting_time_seconds: int = 60
    # After PostFilter gives up on a group, PreFilter turns its pods away for this
    # long (0: no backoff).
    pod_group_backoff_seconds: int = 0
    # PostFilter leaves the group's waiting pods alone while the share of minMember
    # still unplaced is at most this many percent.
    pod_group_reject_percentage: int = 10

    # Upstream ValidateCoschedulingArgs: negative durations and percentages outside
    # [0, 100] are refused when the profile loads.
    @field_validator("permit_waiting_time_seconds", "pod_group_backoff_seconds")
    @classmethod
    def _not_negative(cls, seconds: int) -> int:
        if seconds < 0:
            raise ValueError(f"Invalid value: {seconds}: must be greater than or equal to 0")
        return seconds

    @field_validator("pod_group_reject_percentage")
    @classmethod
    def _percentage(cls, percentage: int) -> int:
        if not 0 <= percentage <= 100:
            raise ValueError(f"Invalid value: {percentage}: must be between 0 and 100")
        return percentage
