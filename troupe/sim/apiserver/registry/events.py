"""Event validation, as upstream's ``ValidateEventCreate`` / ``ValidateEventUpdate``
(pkg/apis/core/validation/events.go), for both views of the one Event storage.

Objects arrive here in their stored (core v1) form; the request's API group decides how
strict the checks are, as upstream's ``requestVersion`` does:

* every write: when ``eventTime`` is set, ``reportingController`` (``reportingComponent``
  through core v1), ``reportingInstance`` (<= 128), ``action`` (<= 128) and ``reason``
  (<= 128) are required and the note (``message``, <= 1024 characters) bounded; without
  ``eventTime`` the involved object's namespace must match the event's;
* writes through events.k8s.io/v1 also need ``eventTime``, ``type`` Normal or Warning,
  no deprecated fields, a ``series`` with count >= 2 and a ``lastObservedTime``; an
  update may change only ``series`` (and metadata).

A malformed ``eventTime`` or ``series.lastObservedTime`` (a MicroTime needs exactly six
fractional digits) cannot be decoded, so it is a 400 as on the real server, not a 422;
so is any modelled field of the wrong JSON type (``schemas.CORE_EVENT`` and
``EVENTS_V1_EVENT``, checked in the shape the request used).
Declared in ``kinds.py``.
"""

from __future__ import annotations

import re
from typing import Any, Final

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.decoding import check_types
from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.registry.schemas import CORE_EVENT, EVENTS_V1_EVENT
from troupe.sim.apiserver.storage.conversion import is_events_view
from troupe.sim.apiserver.storage.store import Store
from troupe.sim.apiserver.storage.strategy import Obj

Cause = tuple[str, str, str]
NOTE_LIMIT: Final = 1024
FIELD_LIMIT: Final = 128  # reportingInstance, action, reason
_MICRO_TIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})")
_NAME_PART: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_NAME_PART_MESSAGE: Final = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
# Fields an events.k8s.io/v1 update may not change, by their stored and shown names.
_IMMUTABLE: Final = (
    ("involvedObject", "involvedObject"),
    ("reason", "reason"),
    ("message", "note"),
    ("source", "source"),
    ("firstTimestamp", "firstTimestamp"),
    ("lastTimestamp", "lastTimestamp"),
    ("count", "count"),
    ("type", "type"),
    ("eventTime", "eventTime"),
    ("action", "action"),
    ("related", "related"),
    ("reportingComponent", "reportingController"),
    ("reportingInstance", "reportingInstance"),
)


def _required(path: str) -> Cause:
    return (path, "FieldValueRequired", "Required value")


def _invalid(path: str, value: Any, why: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    return (path, "FieldValueInvalid", f"Invalid value: {shown}: {why}")


def check_micro_times(obj: Obj) -> None:
    """400 for a time the decoder of a real server could not parse."""
    stamps = [("eventTime", obj.get("eventTime"))]
    series = obj.get("series")
    if isinstance(series, dict):
        stamps.append(("series.lastObservedTime", series.get("lastObservedTime")))
    for path, value in stamps:
        if value is not None and not (
            isinstance(value, str) and _MICRO_TIME.fullmatch(value) is not None
        ):
            raise errors.bad_request(
                f'Event in version "v1" cannot be handled as a Event: {path}: parsing time '
                f'"{value}" as "2006-01-02T15:04:05.000000Z07:00": a MicroTime needs six '
                "fractional digits and a zone"
            )


def legacy_causes(event: Obj, strict: bool) -> list[Cause]:
    """``legacyValidateEvent``: what every Event write must satisfy."""
    causes: list[Cause] = []
    namespace = event["metadata"].get("namespace", "")
    involved = event.get("involvedObject") or {}
    involved_ns = involved.get("namespace") or ""
    if not event.get("eventTime"):
        # An old-style event: its namespace is the involved object's ("default" for
        # cluster-scoped objects, for old clients).
        mismatch = namespace != involved_ns if involved_ns else namespace not in ("", "default")
        if mismatch:
            causes.append(
                _invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
            )
        return causes
    if not involved_ns and namespace not in ("default", "kube-system"):
        causes.append(
            _invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
        )
    controller_path = "reportingController" if strict else "reportingComponent"
    controller = event.get("reportingComponent") or ""
    if not controller:
        causes.append(_required(controller_path))
    else:
        name = controller.rpartition("/")[2]
        if len(name) > 63:
            causes.append(_invalid(controller_path, controller, "name part must be no more "
                                   "than 63 characters"))  # fmt: skip
        elif _NAME_PART.fullmatch(name) is None:
            causes.append(_invalid(controller_path, controller, _NAME_PART_MESSAGE))
    for path in ("reportingInstance", "action", "reason"):
        value = event.get(path) or ""
        if not value:
            causes.append(_required(path))
        elif len(value) > FIELD_LIMIT:
            causes.append(_invalid(path, "", f"can have at most {FIELD_LIMIT} characters"))
    if len(event.get("message") or "") > NOTE_LIMIT:
        causes.append(_invalid("message", "", f"can have at most {NOTE_LIMIT} characters"))
    return causes


def _series_causes(event: Obj) -> list[Cause]:
    series = event.get("series")
    if not isinstance(series, dict):
        return []
    causes: list[Cause] = []
    if int(series.get("count") or 0) < 2:
        causes.append(_invalid("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        causes.append(_required("series.lastObservedTime"))
    return causes


def strict_create_causes(event: Obj) -> list[Cause]:
    """What only writes through events.k8s.io/v1 must satisfy."""
    causes = _series_causes(event)
    if not event.get("eventTime"):
        causes.append(_required("eventTime"))
    kind = event.get("type") or ""
    if kind not in ("Normal", "Warning"):
        causes.append(_invalid("type", "", f"has invalid value: {kind}"))
    for path in ("firstTimestamp", "lastTimestamp"):
        if event.get(path):
            causes.append(_invalid(path, "", "needs to be unset"))
    if event.get("count"):
        causes.append(_invalid("count", "", "needs to be unset"))
    source = event.get("source") or {}
    if source.get("component") or source.get("host"):
        causes.append(_invalid("source", "", "needs to be unset"))
    return causes


class EventStrategy(GenericStrategy):
    def check_types(self, store: Store, rt: ResourceType, obj: Obj) -> None:
        schema = EVENTS_V1_EVENT if is_events_view(rt) else CORE_EVENT
        check_types(rt.kind, rt.version, obj, schema)

    def prepare_create(self, store: Store, rt: ResourceType, obj: Obj) -> None:
        check_micro_times(obj)
        strict = is_events_view(rt)
        causes = legacy_causes(obj, strict)
        if strict:
            causes += strict_create_causes(obj)
        if causes:
            raise errors.invalid(rt, obj["metadata"]["name"], causes)

    def prepare_update(
        self, store: Store, rt: ResourceType, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        check_micro_times(new)
        strict = is_events_view(rt)
        causes = legacy_causes(new, strict)
        if strict:
            if new.get("series") != old.get("series"):
                causes += _series_causes(new)
            for stored, shown in _IMMUTABLE:
                if new.get(stored) != old.get(stored):
                    causes.append(_invalid(shown, _shown(new.get(stored)), "field is immutable"))
        if causes:
            raise errors.invalid(rt, old["metadata"]["name"], causes)


def _shown(value: Any) -> Any:
    return value if isinstance(value, str | int) else str(value)
