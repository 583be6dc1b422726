"""What every kind's API writes go through, whatever its own rules.

``GenericStrategy`` is the strategy of every kind ``kinds.py`` gives no strategy of its
own (ConfigMaps, Services, the custom resources of every CRD, ...) and the base class of
those it does, as upstream's kinds share ``genericregistry.Store``'s checks. On a write
through the HTTP API (``Store.create`` / ``Store.update`` with ``validate=True``):

1. ``check_types``: the body's JSON types against the kind's Go types (``schema``;
   object metadata only unless the kind declares more, ``schemas.py``): a 400 as the
   decoder answers;
2. ``validate``: object metadata (``objectmeta.py``; the name by the kind's name rule,
   declared with the kind in ``kinds.py``) and the kind's own causes (``causes``), all
   in one 422 Invalid; a custom resource is then pruned, defaulted and validated
   against its CRD's structural schema for the version written
   (``crd_schema.apply_schema``).

A write to a status subresource keeps the stored metadata, so only the kind's own
causes apply to it.
"""

from __future__ import annotations

from typing import ClassVar

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.content import NameRule, name_is_dns_subdomain
from troupe.sim.apiserver.machinery.field import Cause
from troupe.sim.apiserver.machinery.meta import clone
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.crd_schema import apply_schema
from troupe.sim.apiserver.registry.decoding import Struct, check_types
from troupe.sim.apiserver.registry.objectmeta import (
    validate_object_meta,
    validate_object_meta_update,
)
from troupe.sim.apiserver.registry.schemas import metadata_only
from troupe.sim.apiserver.storage.store import Obj, Store, Strategy


class GenericStrategy(Strategy[Store]):
    """The checks every kind shares; kinds with rules of their own extend it."""

    # The kind's Go type for ``check_types`` (None: object metadata only).
    schema: ClassVar[Struct | None] = None

    def __init__(self, names: NameRule = name_is_dns_subdomain) -> None:
        self.names = names

    def check_types(self, store: Store, rt: ResourceType, obj: Obj) -> None:
        check_types(rt.kind, rt.version, obj, self.schema or metadata_only(rt.kind))

    def validate(
        self, store: Store, rt: ResourceType, obj: Obj, old: Obj | None, subresource: str | None
    ) -> None:
        meta = obj.get("metadata") or {}
        causes: list[Cause] = []
        if subresource is None:
            if old is None:
                causes = validate_object_meta(meta, self.names)
            else:
                causes = validate_object_meta_update(meta, old.get("metadata") or {})
        causes += self.causes(store, rt, obj, old, subresource)
        if causes:
            raise errors.invalid(rt, str(meta.get("name") or ""), causes)
        if not rt.builtin:
            validate_custom_resource(store, rt, obj)

    def causes(
        self, store: Store, rt: ResourceType, obj: Obj, old: Obj | None, subresource: str | None
    ) -> list[Cause]:
        """The kind's own field errors (upstream's ``Validate<Kind>``); none here."""
        return []


def validate_custom_resource(store: Store, rt: ResourceType, obj: Obj) -> None:
    """Prune, default and validate a custom resource with its CRD's schema for
    ``rt.version``. ``obj`` is pruned in place; raises ``ApiError``."""
    crds = store.registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    crd = store.find(crds, "", f"{rt.plural}.{rt.group}") if crds is not None else None
    if crd is None:
        return
    for version in (crd.get("spec") or {}).get("versions") or ():
        if version.get("name") == rt.version:
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if isinstance(schema, dict):
                # Pruned on a copy: parts of ``obj`` may still be shared with the
                # stored object (the status an update keeps).
                checked = clone(obj)
                apply_schema(rt, checked, schema)
                if "metadata" in obj:  # never pruned; callers hold on to it
                    checked["metadata"] = obj["metadata"]
                obj.clear()
                obj.update(checked)
            return
