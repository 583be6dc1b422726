"""A claim's ``constraints``: ``matchAttribute`` and ``distinctAttribute``.

Follows upstream's ``matchAttributeConstraint`` / ``distinctAttributeConstraint``
(``structured/internal/incubating``): a constraint applies to the devices of the
requests it names (all requests when it names none; a subrequest counts as its parent's
name or as ``parent/sub``); a device without the attribute never satisfies it; the
attribute is looked up by its fully qualified name, or by the bare name when the domain
is the device's driver. ``matchAttribute``: every device has the value of the first;
``distinctAttribute``: no two devices share a value. Values compare by kind and value
(versions as strings, as upstream).

Upstream keys distinct values by request name, so two devices of one request can slip
past each other; troupe keeps every value, which is what the field promises.

The allocator calls ``add`` before taking a device and ``remove`` when it backtracks, in
stack order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from troupe.api.dra.objects import DeviceAttribute
from troupe.plugins.dynamicresources.pools import DeviceEntry

AttributeValue = tuple[str, object]


def attribute_value(entry: DeviceEntry, qualified: str) -> AttributeValue | None:
    """``lookupAttribute``: the device's value of ``domain/name``, as (kind, value)."""
    attributes = entry.device.attributes
    attribute = attributes.get(qualified)
    if attribute is None:
        domain, sep, name = qualified.partition("/")
        if not sep or domain != entry.id.driver:
            return None
        attribute = attributes.get(name)
    return None if attribute is None else _typed(attribute)


def _typed(attribute: DeviceAttribute) -> AttributeValue | None:
    if attribute.int_value is not None:
        return ("int", attribute.int_value)
    if attribute.bool_value is not None:
        return ("bool", attribute.bool_value)
    if attribute.string_value is not None:
        return ("string", attribute.string_value)
    if attribute.version_value is not None:
        return ("version", attribute.version_value)
    return None


@dataclass
class Constraint:
    """One constraint of one claim during one allocation attempt."""

    requests: frozenset[str]
    attribute: str
    distinct: bool
    values: list[AttributeValue] = field(default_factory=list)
    skipped: list[bool] = field(default_factory=list)

    def applies(self, request: str, parent: str | None) -> bool:
        if not self.requests:
            return True
        if parent is None:
            return request in self.requests
        return parent in self.requests or f"{parent}/{request}" in self.requests

    def add(self, request: str, parent: str | None, entry: DeviceEntry) -> bool:
        """Whether ``entry`` may join; if so it is recorded until ``remove``."""
        if not self.applies(request, parent):
            self.skipped.append(True)
            return True
        value = attribute_value(entry, self.attribute)
        if value is None:
            return False
        if self.values and (value in self.values if self.distinct else value != self.values[0]):
            return False
        self.values.append(value)
        self.skipped.append(False)
        return True

    def remove(self) -> None:
        """Undo the latest successful ``add``."""
        if not self.skipped.pop():
            self.values.pop()
