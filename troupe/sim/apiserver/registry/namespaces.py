"""Namespaces: their defaults, which may not be deleted, and what a delete takes along.

``NamespaceStrategy`` defaults ``spec.finalizers`` and ``status.phase: Active`` and the
``kubernetes.io/metadata.name`` label; the three system namespaces cannot be deleted
(upstream's NamespaceLifecycle admission); deleting a namespace deletes its contents at
once (upstream's namespace controller does it asynchronously while the namespace is
Terminating). Declared in ``kinds.py``; ``bootstrap.new_store`` creates the system
namespaces.
"""

from __future__ import annotations

from typing import Final

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.storage.store import Obj, Store
from troupe.sim.apiserver.storage.watchers import DELETED, WatchEvent

SYSTEM_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")
_UNDELETABLE: Final = ("default", "kube-system", "kube-public")


class NamespaceStrategy(GenericStrategy):
    def prepare_create(self, store: Store, rt: ResourceType, obj: Obj) -> None:
        obj["spec"] = {"finalizers": ["kubernetes"], **(obj.get("spec") or {})}
        obj["status"] = {"phase": "Active"}
        labels = dict(obj["metadata"].get("labels") or {})
        labels.setdefault("kubernetes.io/metadata.name", obj["metadata"]["name"])
        obj["metadata"]["labels"] = labels

    def check_delete(self, store: Store, rt: ResourceType, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        if name in _UNDELETABLE:
            raise errors.forbidden(rt, name, "this namespace may not be deleted")

    def after_write(self, store: Store, rt: ResourceType, event: WatchEvent) -> None:
        if event.type != DELETED:
            return
        namespace = event.obj["metadata"]["name"]
        for kind in store.registry:
            if not kind.namespaced or kind.key == rt.key:
                continue
            for obj in store.list(kind, namespace, copy=False):
                store.delete(
                    kind, obj["metadata"]["name"], namespace, grace_period_seconds=0, copy=False
                )
