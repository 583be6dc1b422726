"""Which topology domains a gang must, and would rather, stay in.

Kubernetes 1.37 (KEP-5732) has one hard level: a v1alpha2/v1beta1 PodGroup's
``spec.schedulingConstraints.topology[0].key`` (and a CompositePodGroup's, KEP-6012):
every member on nodes with one value of that node label. troupe reads the same from
annotations on any group object, so scheduler-plugins PodGroups and v1alpha1 Workloads
get topology without migrating, and adds preferred levels inside the required one:

- ``topology.troupe.dev/required: <label key>``: one domain of that label, as upstream;
- ``topology.troupe.dev/preferred: <key>[,<key>...]``: outermost first; the gang goes
  into a single domain of the innermost level that has room for it, else of the next
  level out, else into as few domains of the outermost preferred level as it can.

An object's ``schedulingConstraints`` wins over the required annotation; the profile's
``TopologyPlacement`` args give defaults per API (``troupe.plugins.topologyplacement``).
docs/topology.md has the examples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from troupe.api.selectors import qualified_name_errors

REQUIRED_ANNOTATION: Final = "topology.troupe.dev/required"
PREFERRED_ANNOTATION: Final = "topology.troupe.dev/preferred"


@dataclass(frozen=True, slots=True)
class TopologyLevels:
    """``required``: the node label whose one value holds every member ("" for the
    whole cluster); ``preferred``: labels inside it, outermost first."""

    required: str = ""
    preferred: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.required or self.preferred)

    @property
    def keys(self) -> tuple[str, ...]:
        return ((self.required,) if self.required else ()) + self.preferred


def levels_from(
    annotations: Mapping[str, str], constraint_keys: tuple[str, ...] = ()
) -> tuple[TopologyLevels, str, str]:
    """The levels an object asks for: (levels, offending field, message); the field
    and message are empty when the input is valid."""
    required = constraint_keys[0] if constraint_keys else annotations.get(REQUIRED_ANNOTATION, "")
    field = (
        "spec.schedulingConstraints.topology[0].key"
        if constraint_keys
        else f"metadata.annotations[{REQUIRED_ANNOTATION}]"
    )
    if len(constraint_keys) > 1:
        return (
            TopologyLevels(),
            "spec.schedulingConstraints.topology",
            f"must have at most 1 item, got {len(constraint_keys)}",
        )
    required = required.strip()
    if required or REQUIRED_ANNOTATION in annotations or constraint_keys:
        errors = qualified_name_errors(required, field)
        if errors:
            return TopologyLevels(), field, "; ".join(errors).removeprefix(f"{field}: ")
    text = annotations.get(PREFERRED_ANNOTATION, "")
    preferred = tuple(k.strip() for k in text.split(",")) if text.strip() else ()
    pfield = f"metadata.annotations[{PREFERRED_ANNOTATION}]"
    for key in preferred:
        errors = qualified_name_errors(key, pfield)
        if errors:
            return TopologyLevels(), pfield, "; ".join(errors).removeprefix(f"{pfield}: ")
    seen = {required} if required else set()
    for key in preferred:
        if key in seen:
            return (
                TopologyLevels(),
                pfield,
                f"names the label {key!r} twice (or as the required level too)",
            )
        seen.add(key)
    return TopologyLevels(required, preferred), "", ""


def short_name(key: str) -> str:
    """How messages name a level: the label's name part (``zone`` for
    ``topology.kubernetes.io/zone``)."""
    return key.rsplit("/", 1)[-1]
