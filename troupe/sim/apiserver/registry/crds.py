"""CustomResourceDefinitions: registering and unregistering the kinds they define.

Creating a CRD registers a ``ResourceType`` per served version (scope, status
subresource, short names) so the server serves and advertises it; the status reports
NamesAccepted and Established at once. Deleting it deletes every custom object of the
kind, ends open watches and stops serving it. ``CRDStrategy`` is declared in
``kinds.py``; the custom objects themselves are checked against the CRD's schema by
``generic.GenericStrategy`` (``crd_schema.py``).
"""

from __future__ import annotations

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.content import NameRule, name_is_dns_subdomain
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.storage.store import Obj, Store
from troupe.sim.apiserver.storage.watchers import ADDED, DELETED, MODIFIED, WatchEvent


def crd_types(crd: Obj) -> list[ResourceType]:
    """The served ResourceTypes of a CRD, storage version first."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    versions = sorted(
        (v for v in spec.get("versions") or [] if v.get("served", True)),
        key=lambda v: not v.get("storage", False),
    )
    return [
        ResourceType(
            group=spec["group"],
            version=v["name"],
            kind=names["kind"],
            plural=names["plural"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            subresources=("status",) if "status" in (v.get("subresources") or {}) else (),
            categories=tuple(names.get("categories") or ()),
            allow_unconditional_update=False,
            builtin=False,
        )
        for v in versions
    ]


class CRDStrategy(GenericStrategy):
    def __init__(self, names: NameRule = name_is_dns_subdomain) -> None:
        super().__init__(names)
        self._served: dict[str, list[ResourceType]] = {}

    def prepare_create(self, store: Store, rt: ResourceType, obj: Obj) -> None:
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        name = obj["metadata"]["name"]
        causes: list[tuple[str, str, str]] = []
        for field in ("plural", "kind"):
            if not names.get(field):
                causes.append((f"spec.names.{field}", "FieldValueRequired", "Required value"))
        if not spec.get("group"):
            causes.append(("spec.group", "FieldValueRequired", "Required value"))
        if not spec.get("versions"):
            causes.append(
                (
                    "spec.versions",
                    "FieldValueInvalid",
                    "Invalid value: []: must have exactly one version marked as storage version",
                )
            )
        if not causes and name != f"{names['plural']}.{spec['group']}":
            causes.append(
                (
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
                )
            )
        if causes:
            raise errors.invalid(rt, name, causes)
        names = dict(names)
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
        spec["names"] = names
        storage = [v["name"] for v in spec["versions"] if v.get("storage")]
        now = store.now()
        obj["status"] = {
            "acceptedNames": names,
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": now,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": now,
                },
            ],
            "storedVersions": storage or [spec["versions"][0]["name"]],
        }

    def after_write(self, store: Store, rt: ResourceType, event: WatchEvent) -> None:
        name = event.obj["metadata"]["name"]
        if event.type in (MODIFIED, DELETED):
            self._unserve(store, name, delete_objects=event.type == DELETED)
        if event.type in (ADDED, MODIFIED):
            served = [
                t
                for t in crd_types(event.obj)
                if store.registry.lookup(t.group, t.version, t.plural) is None
            ]
            for t in served:
                store.registry.add(t)
            self._served[name] = served

    def _unserve(self, store: Store, name: str, *, delete_objects: bool) -> None:
        served = self._served.pop(name, [])
        if delete_objects and served:
            storage = served[0]
            for obj in store.list(storage, copy=False):
                meta = obj["metadata"]
                store.delete(
                    storage, meta["name"], meta.get("namespace"), grace_period_seconds=0, copy=False
                )
            store.close_watchers(storage.key)
        for t in served:
            store.registry.remove(t)
