"""The per-kind hook interface of the store, and upstream's delete preconditions.

``Strategy`` is the behaviour of a kind with no rules (every hook a no-op); the
strategies of ``registry/`` override it (``registry/kinds.py`` says which kind has
which). ``store.Store`` calls the hooks around every write, the way a
``genericregistry.Store`` calls its RESTCreateStrategy / RESTUpdateStrategy /
RESTDeleteStrategy. ``Strategy`` is generic over the store passed
to its hooks (``Strategy[Store]``), so this module does not import ``store``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Generic, TypeVar

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.storage.watchers import WatchEvent

Obj = dict[str, Any]
StoreT = TypeVar("StoreT")

# Fields a client cannot set or change through create/update (ObjectMeta system fields).
SYSTEM_META: Final = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


class Strategy(Generic[StoreT]):
    """Per-kind hooks around writes; the base class is the generic behaviour."""

    def prepare_create(self, store: StoreT, rt: ResourceType, obj: Obj) -> None:
        """Default and validate a new object; raise ``ApiError`` to refuse it."""

    def prepare_update(
        self, store: StoreT, rt: ResourceType, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        """Validate an update (``new`` may be changed in place; it is a fresh dict)."""

    def check_types(self, store: StoreT, rt: ResourceType, obj: Obj) -> None:
        """Refuse (400) a write whose values have the wrong JSON types, as the decoder of
        a real server would, before anything reads them: called first, only for writes
        made with ``validate=True``."""

    def validate(
        self, store: StoreT, rt: ResourceType, obj: Obj, old: Obj | None, subresource: str | None
    ) -> None:
        """What a write through the API must pass, after ``prepare_create`` /
        ``prepare_update`` (upstream's ``Validate`` / ``ValidateUpdate``; ``old`` is None
        on create): called only for writes made with ``validate=True``. Raise
        ``ApiError`` to refuse; ``obj`` may be changed in place (a custom resource is
        pruned)."""

    def check_delete(self, store: StoreT, rt: ResourceType, obj: Obj) -> None:
        """Raise ``ApiError`` to refuse a delete."""

    def grace_period(self, store: StoreT, rt: ResourceType, obj: Obj, requested: int | None) -> int:
        """Seconds a delete waits (0: remove at once)."""
        return 0

    def after_write(self, store: StoreT, rt: ResourceType, event: WatchEvent) -> None:
        """React to a stored change (register CRD types, schedule reaping, ...)."""


def check_delete_preconditions(rt: ResourceType, obj: Obj, pre: Mapping[str, Any]) -> None:
    # rest.BeforeDelete: the Conflict names the object's kind (with its group).
    meta = obj["metadata"]
    name = meta["name"]
    resource = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    uid = pre.get("uid")
    if uid is not None and uid != meta.get("uid"):
        raise errors.conflict(
            resource,
            rt.group,
            rt.kind,
            name,
            f"the UID in the precondition ({uid}) does not match the UID in record "
            f"({meta.get('uid')}). "
            "The object might have been deleted and then recreated",
        )
    rv = pre.get("resourceVersion")
    if rv is not None and rv != meta.get("resourceVersion"):
        raise errors.conflict(
            resource,
            rt.group,
            rt.kind,
            name,
            f"the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in "
            f"record ({meta.get('resourceVersion')}). The object might have been modified",
        )


def spec_part(obj: Obj) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def merge_update(rt: ResourceType, obj: Obj, old: Obj, subresource: str | None) -> Obj:
    """The object a PUT stores: system metadata kept from ``old``; the status subresource
    changes only status, the main resource never changes status when a status
    subresource exists; generation bumps when anything but metadata and status changed."""
    if subresource == "status":
        # The status subresource ignores everything but status.
        new = {**old, "status": obj.get("status", {})}
        new["metadata"] = dict(old["metadata"])
        return new
    new = dict(obj)
    new["kind"], new["apiVersion"] = old["kind"], old["apiVersion"]
    meta = dict(obj.get("metadata") or {})
    old_meta = old["metadata"]
    for field in (*SYSTEM_META, "name", "namespace"):
        if field in old_meta:
            meta[field] = old_meta[field]
        else:
            meta.pop(field, None)
    new["metadata"] = meta
    if rt.has_status:
        # The main resource ignores status changes when a status subresource exists.
        if "status" in old:
            new["status"] = old["status"]
        else:
            new.pop("status", None)
    if spec_part(new) != spec_part(old):
        meta["generation"] = int(old_meta.get("generation", 1)) + 1
    return new
