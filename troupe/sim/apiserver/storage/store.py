"""The in-memory object store behind the embedded API server: ``Store`` and its writes.

Objects are plain JSON dicts, kept per kind key and never mutated once stored: a write
builds a new dict (sharing unchanged sub-dicts with the old one), so reads and watch
fan-out hand out references without copying. One global integer resourceVersion orders
every write, as etcd's revision does; each kind keeps a bounded history of events for
watches that resume from a resourceVersion (``floor`` is the oldest RV still resumable,
upstream's ``oldest-1``). The objects, reads, lists and watches are ``reads.StoreReads``,
the base class; this module holds the writes (create, update, patch, delete) and what
they go through.

Kind-specific behaviour (pod defaults and admission, validation, CRD registration,
graceful pod deletion) lives in ``Strategy`` objects, declared per kind in
``registry/kinds.py`` and installed by ``registry.bootstrap.new_store``. The HTTP
server calls the ``*_shared`` style methods with ``copy=False``; in-process callers (the
simulated kubelets, scenarios, tests) use the same methods and get private copies. Every
write, whoever makes it, emits the same watch events.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from troupe.api.clock import Clock, RealClock
from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.meta import clone, generate_name, new_uid, rfc3339
from troupe.sim.apiserver.machinery.patch import merge_patch, strategic_merge_patch
from troupe.sim.apiserver.machinery.resources import Registry, ResourceType
from troupe.sim.apiserver.storage.conversion import to_storage, to_view
from troupe.sim.apiserver.storage.reads import StoreReads, object_index
from troupe.sim.apiserver.storage.strategy import (
    SYSTEM_META,
    Obj,
    Strategy,
    check_delete_preconditions,
    merge_update,
)
from troupe.sim.apiserver.storage.watchers import (
    ADDED,
    DELETED,
    MODIFIED,
    WatchEvent,
    with_resource_version,
)


class Store(StoreReads):
    def __init__(
        self,
        registry: Registry,
        *,
        history: int = 10000,
        clock: Clock | None = None,
        default_strategy: Strategy[Store] | None = None,
    ) -> None:
        super().__init__(registry, history)
        self.clock: Clock = clock or RealClock()
        self._strategies: dict[str, Strategy[Store]] = {}
        self._default_strategy: Strategy[Store] = default_strategy or Strategy()
        self._tasks: set[asyncio.Task[None]] = set()

    # --- plumbing ----------------------------------------------------------------------

    def set_strategy(self, key: str, strategy: Strategy[Store]) -> None:
        self._strategies[key] = strategy

    def strategy(self, rt: ResourceType) -> Strategy[Store]:
        return self._strategies.get(rt.key, self._default_strategy)

    def _version_of(self, kind: str | ResourceType, obj: Obj) -> ResourceType:
        """The type a write goes through: for an in-process write naming a kind key, the
        served version its ``apiVersion`` names (converted to the stored shape), else the
        storage version. An HTTP write goes through its URL's version."""
        rt = self.resolve(kind)
        api_version = obj.get("apiVersion")
        if isinstance(kind, ResourceType) or not api_version or api_version == rt.api_version:
            return rt
        for served in self.registry.versions_of(rt.key):
            if served.api_version == api_version and served.kind == rt.kind:
                return served
        return rt

    def now(self) -> str:
        return rfc3339(self.clock.wall())

    def spawn(self, coro: Any) -> None:
        """Run a background job owned by the store (cancelled by ``close``)."""
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.hub.close_watchers()

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _emit(self, rt: ResourceType, type_: str, obj: Obj, prev: Obj | None) -> WatchEvent:
        event = WatchEvent(type_, self._rv, obj, prev)
        self.hub.publish(rt.key, event)
        self.strategy(rt).after_write(self, rt, event)
        self.hub.notify(rt.key, event)
        return event

    # --- writes ------------------------------------------------------------------------

    def create(
        self,
        kind: str | ResourceType,
        obj: Obj,
        namespace: str | None = None,
        *,
        copy: bool = True,
        validate: bool = False,
    ) -> Obj:
        """Store a new object (``obj`` is taken over unless ``copy``); returns the stored one.

        ``validate`` (the HTTP API sets it) first checks the JSON types of what is
        modelled (``Strategy.check_types``), then applies ``validate_write``: the kind's
        ``Strategy.validate``."""
        rt = self._version_of(kind, obj)
        if validate:
            self.strategy(rt).check_types(self, rt, obj)
        obj = to_storage(rt, clone(obj) if copy else obj)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        if rt.namespaced:
            namespace = namespace or meta.get("namespace") or "default"
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            if self.find(self.registry.resolve("namespaces"), "", namespace) is None:
                raise errors.namespace_not_found(namespace)
            meta["namespace"] = namespace
        else:
            namespace = ""
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = generate_name(str(meta["generateName"]))
        name = meta.get("name") or ""
        if not name:
            raise errors.invalid(
                rt,
                "",
                [
                    (
                        "metadata.name",
                        "FieldValueRequired",
                        "Required value: name or generateName is required",
                    )
                ],
            )
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
        served = self.registry.versions_of(rt.key)
        obj = {"kind": rt.kind, "apiVersion": (served[0] if served else rt).api_version, **obj}
        for field in SYSTEM_META:
            meta.pop(field, None)
        meta.pop("resourceVersion", None)
        if rt.has_status and not rt.keeps_status_on_create:
            # PrepareForCreate of kinds with a status subresource drops client-set status.
            obj.pop("status", None)
        if rt.initial_phase:
            # PersistentVolume(Claim)s are read back defaulted to phase Pending; PVs stamp
            # the transition (PersistentVolumeLastPhaseTransitionTime, GA in 1.31).
            obj["status"] = {"phase": rt.initial_phase}
            if rt.stamps_phase_transition:
                obj["status"]["lastPhaseTransitionTime"] = self.now()
        self.strategy(rt).prepare_create(self, rt, obj)
        if validate:
            self.validate_write(rt, obj, None, None)
        index = object_index(namespace, name)
        objects = self.objects(rt)
        if index in objects:
            raise errors.already_exists(rt, name)
        meta["uid"] = new_uid()
        meta["creationTimestamp"] = self.now()
        meta["generation"] = 1
        meta["resourceVersion"] = self._next_rv()
        objects[index] = obj
        self._emit(rt, ADDED, obj, None)
        view = to_view(rt, obj)
        return clone(view) if copy else view

    def update(
        self,
        kind: str | ResourceType,
        obj: Obj,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        copy: bool = True,
        validate: bool = False,
    ) -> Obj:
        """PUT semantics: optimistic concurrency on metadata.resourceVersion when given.
        ``validate`` as for ``create``."""
        rt = self._version_of(kind, obj)
        if validate:
            self.strategy(rt).check_types(self, rt, obj)
        obj = to_storage(rt, clone(obj) if copy else obj)
        raw_meta = obj.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        name = str(meta.get("name") or "")
        ns = (namespace or meta.get("namespace") or "default") if rt.namespaced else ""
        old = self.find(rt, ns, name)
        if old is None:
            if rt.allow_create_on_update and subresource is None:
                meta.pop("resourceVersion", None)
                return self.create(rt, obj, ns or None, copy=copy, validate=validate)
            raise errors.not_found(rt, name)
        rv = meta.get("resourceVersion")
        if rv:
            if rv != old["metadata"]["resourceVersion"]:
                raise errors.stale_conflict(rt, name)
        elif not rt.allow_unconditional_update:
            raise errors.invalid(
                rt,
                name,
                [
                    (
                        "metadata.resourceVersion",
                        "FieldValueInvalid",
                        "Invalid value: 0x0: must be specified for an update",
                    )
                ],
            )
        uid = meta.get("uid")
        if uid and uid != old["metadata"]["uid"]:
            raise errors.storage_precondition_conflict(rt, ns, name, uid, old["metadata"]["uid"])
        new = merge_update(rt, obj, old, subresource)
        self.strategy(rt).prepare_update(self, rt, new, old, subresource)
        if validate:
            self.validate_write(rt, new, old, subresource)
        result = to_view(rt, self._commit_update(rt, new, old))
        return clone(result) if copy else result

    def validate_write(
        self, rt: ResourceType, obj: Obj, old: Obj | None, subresource: str | None
    ) -> None:
        """What kube-apiserver checks of a client's write beyond the kind's preparation:
        the kind's ``Strategy.validate`` (object metadata, quantities of pods and nodes,
        a custom resource's CRD schema, ...). Raises ``ApiError``; ``obj`` may be pruned
        in place."""
        self.strategy(rt).validate(self, rt, obj, old, subresource)

    def _commit_update(self, rt: ResourceType, new: Obj, old: Obj) -> Obj:
        meta = new["metadata"]
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return old  # A no-op update writes nothing and emits nothing, as upstream.
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not meta.get("deletionGracePeriodSeconds")
        ):
            return self._remove(rt, old, final=new)
        meta["resourceVersion"] = self._next_rv()
        self.objects(rt)[object_index(meta.get("namespace", ""), meta["name"])] = new
        self._emit(rt, MODIFIED, new, old)
        return new

    def replace_object(self, rt: ResourceType, new: Obj, old: Obj) -> Obj:
        """Commit a server-side change built from ``old`` (binding, graceful delete, ...)."""
        return self._commit_update(rt, new, old)

    def patch_status(
        self,
        kind: str | ResourceType,
        name: str,
        status: Mapping[str, Any],
        namespace: str | None = None,
        *,
        strategic: bool | None = None,
    ) -> Obj:
        """Patch the object's status as a status-subresource write: a strategic merge patch
        (conditions merged by type) for built-in kinds, a JSON merge patch (RFC 7386) for
        custom resources, unless ``strategic`` says otherwise."""
        rt = self.resolve(kind)
        old = self.get(rt, name, namespace, copy=False)
        use_strategic = rt.builtin if strategic is None else strategic
        patch_fn = strategic_merge_patch if use_strategic else merge_patch
        new = {**old, "status": patch_fn(old.get("status") or {}, dict(status))}
        new["metadata"] = dict(old["metadata"])
        self.strategy(rt).prepare_update(self, rt, new, old, "status")
        result: Obj = clone(self._commit_update(rt, new, old))
        return result

    def delete(
        self,
        kind: str | ResourceType,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        preconditions: Mapping[str, Any] | None = None,
        copy: bool = True,
    ) -> tuple[Obj, bool]:
        """Delete (or start deleting) an object: (its last state, whether it is gone now)."""
        rt = self.resolve(kind)
        ns = (namespace or "default") if rt.namespaced else ""
        old = self.find(rt, ns, name)
        if old is None:
            raise errors.not_found(rt, name)
        self.strategy(rt).check_delete(self, rt, old)
        check_delete_preconditions(rt, old, preconditions or {})
        meta = old["metadata"]
        grace = self.strategy(rt).grace_period(self, rt, old, grace_period_seconds)
        if meta.get("deletionTimestamp"):
            current = meta.get("deletionGracePeriodSeconds") or 0
            if grace >= current or (grace > 0 and meta.get("finalizers")):
                old = to_view(rt, old)
                return (clone(old) if copy else old), False
        if grace > 0 or meta.get("finalizers"):
            new_meta = dict(meta)
            wall = self.clock.wall()
            if grace > 0 or not meta.get("deletionTimestamp"):
                new_meta["deletionTimestamp"] = rfc3339(wall + grace)
            new_meta["deletionGracePeriodSeconds"] = grace
            if grace > 0:
                new_meta["generation"] = int(meta.get("generation", 1)) + 1
            new = {**old, "metadata": new_meta}
            result = to_view(rt, self._commit_update(rt, new, old))
            gone = self.find(rt, ns, name) is None
            return (clone(result) if copy else result), gone
        result = to_view(rt, self._remove(rt, old))
        return (clone(result) if copy else result), True

    def _remove(self, rt: ResourceType, old: Obj, final: Obj | None = None) -> Obj:
        meta = old["metadata"]
        self.objects(rt).pop(
            object_index(meta.get("namespace", "") if rt.namespaced else "", meta["name"]), None
        )
        last = with_resource_version(final or old, self._next_rv())
        self._emit(rt, DELETED, last, old)
        return last


__all__ = ["DELETED", "MODIFIED", "Obj", "Store", "Strategy"]
