"""What every kind's API writes go through, whatever its own rules.

``GenericStrategy`` is the strategy of every kind ``kinds.py`` gives no strategy of its
own (ConfigMaps, Leases, the custom resources of every CRD, ...) and the base class of
those it does, as upstream's kinds share ``genericregistry.Store``'s checks. Its
``validate`` runs on writes through the HTTP API (``Store.create`` / ``Store.update``
with ``validate=True``): a custom resource is pruned, defaulted and validated against
its CRD's structural schema for the version written (``crd_schema.apply_schema``).
"""

from __future__ import annotations

from troupe.sim.apiserver.machinery.meta import clone
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.crd_schema import apply_schema
from troupe.sim.apiserver.storage.store import Obj, Store, Strategy


class GenericStrategy(Strategy[Store]):
    """The checks every kind shares; kinds with rules of their own extend it."""

    def validate(self, store: Store, rt: ResourceType, obj: Obj, subresource: str | None) -> None:
        if not rt.builtin:
            validate_custom_resource(store, rt, obj)


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
