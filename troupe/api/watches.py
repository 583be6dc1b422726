"""API objects a plugin watches: what it declares, and how it hears of them.

A plugin that needs cluster objects the engine does not keep (PersistentVolumes,
ResourceClaims, ...) implements ``WatchesObjects``: ``watched_objects()`` returns one
``ObjectWatch`` per resource it needs, saying which resource (``ObjectKind``: group,
version, resource, kind, namespaced or not), the model each object is parsed into (a
``troupe.api.objects`` model or any pydantic model with a ``metadata: ObjectMeta``, or
``RawObject`` for the JSON as a dict), and the callbacks that receive its adds, updates
and deletes, and (``on_unserved``) that the cluster does not serve it at all.
``ObjectStore`` is a ready lister a plugin can hand its watch to.

Who calls what: the framework reads ``watched_objects()`` once, when a profile's
plugins are built (``troupe.scheduler.framework.points``); ``share_watches`` merges
the declarations of every profile into one ``SharedWatch`` per resource; the daemon
starts one informer per shared watch the server serves (``troupe.kube.object_informers``,
which asks API discovery first) and waits for its first list before the first pod is
scheduled. The callbacks run on the event loop, in the informer's task, and never
while a scheduling cycle runs (a cycle never yields), so what a plugin keeps cannot
change under its Filter. After the plugins' callbacks, each change becomes a
``ClusterEvent`` (``ObjectKind.event``: ADD, UPDATE_OTHER or DELETE of the kind's
``event_resource``), so queueing hints registered for it release the pods it may
help. Upstream does the same with the informers its plugins' ``EventsToRegister``
name (``pkg/scheduler/eventhandlers.go``, ``addAllEventHandlers``, dynamic informers
for other resources).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, model_validator

from troupe.api.events import Action, ClusterEvent, Resource
from troupe.api.objects import ObjectMeta


@dataclass(frozen=True, slots=True)
class ObjectKind:
    """One API resource: ``/api/v1/<resource>`` for the core group (``group`` ""),
    ``/apis/<group>/<version>/<resource>`` otherwise; ``kind`` is what API discovery
    lists for it."""

    group: str
    version: str
    resource: str  # the plural, as in a URL: "persistentvolumeclaims"
    kind: str  # "PersistentVolumeClaim"
    namespaced: bool

    @property
    def group_version(self) -> str:
        """``v1`` or ``resource.k8s.io/v1`` (an object's ``apiVersion``)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """``persistentvolumeclaims`` or ``resourceclaims.resource.k8s.io``."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def event_resource(self) -> str:
        """What its changes are reported as: upstream's ``EventResource`` name where
        upstream has one (``PersistentVolumeClaim``), else ``<resource>.<version>[.<group>]``."""
        known = _EVENT_RESOURCES.get((self.group, self.resource))
        if known is not None:
            return known
        return f"{self.resource}.{self.version}" + (f".{self.group}" if self.group else "")

    def event(self, action: Action) -> ClusterEvent:
        """The cluster event of ``action`` on this kind: what a plugin registers in
        ``events_to_register``, and what the daemon reports (ADD, UPDATE_OTHER, DELETE)."""
        return ClusterEvent(self.event_resource, action, _label(self.event_resource, action))

    def __str__(self) -> str:
        return f"{self.group_resource}/{self.version}"


def _label(resource: str, action: Action) -> str:
    suffix = {Action.ADD: "Add", Action.UPDATE_OTHER: "Update", Action.DELETE: "Delete"}
    return resource + suffix[action] if action in suffix else ""


# The kinds the volume and device plugins watch (upstream's informers for them).
PERSISTENT_VOLUMES: Final = ObjectKind("", "v1", "persistentvolumes", "PersistentVolume", False)
PERSISTENT_VOLUME_CLAIMS: Final = ObjectKind(
    "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True
)
STORAGE_CLASSES: Final = ObjectKind("storage.k8s.io", "v1", "storageclasses", "StorageClass", False)
CSI_NODES: Final = ObjectKind("storage.k8s.io", "v1", "csinodes", "CSINode", False)
CSI_DRIVERS: Final = ObjectKind("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False)
CSI_STORAGE_CAPACITIES: Final = ObjectKind(
    "storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True
)
VOLUME_ATTACHMENTS: Final = ObjectKind(
    "storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False
)
RESOURCE_CLAIMS: Final = ObjectKind(
    "resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True
)
RESOURCE_SLICES: Final = ObjectKind(
    "resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False
)
DEVICE_CLASSES: Final = ObjectKind("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False)
RESOURCE_CLAIM_TEMPLATES: Final = ObjectKind(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True
)

_EVENT_RESOURCES: Final[dict[tuple[str, str], Resource]] = {
    (k.group, k.resource): Resource(k.kind)
    for k in (
        PERSISTENT_VOLUMES,
        PERSISTENT_VOLUME_CLAIMS,
        STORAGE_CLASSES,
        CSI_NODES,
        CSI_DRIVERS,
        CSI_STORAGE_CAPACITIES,
        VOLUME_ATTACHMENTS,
        RESOURCE_CLAIMS,
        RESOURCE_SLICES,
        DEVICE_CLASSES,
        RESOURCE_CLAIM_TEMPLATES,
    )
}


class HasMetadata(Protocol):
    """What a watched object's model must have: its ``ObjectMeta`` (the informer keys,
    orders and reconciles objects by it)."""

    @property
    def metadata(self) -> ObjectMeta: ...


T = TypeVar("T", bound=HasMetadata)


class RawObject(BaseModel):
    """An object kept as the JSON the server sent (``raw``, a dict; treat it as
    read-only), with its metadata parsed. Build one with ``RawObject.of(dict)``: every
    validation wraps the whole input."""

    model_config = ConfigDict(frozen=True)

    metadata: ObjectMeta
    raw: dict[str, Any]

    @model_validator(mode="before")
    @classmethod
    def _whole(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {"metadata": data.get("metadata") or {}, "raw": data}
        return data

    @classmethod
    def of(cls, obj: dict[str, Any]) -> RawObject:
        return cls.model_validate(obj)


@dataclass(frozen=True, slots=True)
class ObjectWatch(Generic[T]):
    """One resource a plugin needs, and where its events go. ``model`` parses each
    object; an object that does not parse is logged once (object and field) and left
    out, and one that stops parsing is delivered as a delete. ``on_unserved`` is called
    once, at start-up, when the cluster does not serve the resource (nothing else is
    then ever delivered)."""

    kind: ObjectKind
    model: type[T]
    on_add: Callable[[T], None]
    on_update: Callable[[T, T], None]
    on_delete: Callable[[T], None]
    on_unserved: Callable[[], None] | None = None


@runtime_checkable
class WatchesObjects(Protocol):
    """A plugin that needs API objects beyond pods, nodes, PodGroups, PriorityClasses,
    PodDisruptionBudgets and namespaces. Read once, when its profile is built."""

    def watched_objects(self) -> Sequence[ObjectWatch[Any]]: ...


class ObjectStore(Generic[T]):
    """The objects of one resource as the informer last saw them (upstream: a lister
    from the informer factory). A plugin keeps one and returns ``store.watch(Model)``
    from ``watched_objects``; ``generation`` moves with every change."""

    def __init__(self, kind: ObjectKind) -> None:
        self.kind = kind
        self._objects: dict[str, T] = {}
        self.generation = 0
        # False once the daemon found the cluster does not serve the resource.
        self.served = True

    def watch(
        self, model: type[T], *, on_change: Callable[[T | None, T | None], None] | None = None
    ) -> ObjectWatch[T]:
        """The declaration filling this store; ``on_change(old, new)`` after each
        change (None for the missing side), for a plugin that keeps more than objects."""

        def added(obj: T) -> None:
            self._put(obj)
            if on_change is not None:
                on_change(None, obj)

        def updated(old: T, new: T) -> None:
            self._put(new)
            if on_change is not None:
                on_change(old, new)

        def deleted(obj: T) -> None:
            m = obj.metadata
            self._objects.pop(_key(m.namespace, m.name), None)
            self.generation += 1
            if on_change is not None:
                on_change(obj, None)

        def unserved() -> None:
            self.served = False

        return ObjectWatch(self.kind, model, added, updated, deleted, unserved)

    def _put(self, obj: T) -> None:
        m = obj.metadata
        self._objects[_key(m.namespace, m.name)] = obj
        self.generation += 1

    def get(self, name: str, namespace: str = "") -> T | None:
        return self._objects.get(_key(namespace, name))

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._objects.values()))

    def __len__(self) -> int:
        return len(self._objects)


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


@dataclass(frozen=True, slots=True)
class SharedWatch:
    """Every declaration of one resource across the profiles' plugins: one informer."""

    kind: ObjectKind
    model: type[Any]
    # (who declared it, e.g. ``VolumeBinding (profile troupe-scheduler)``; the watch)
    watches: tuple[tuple[str, ObjectWatch[Any]], ...] = field(default=())

    @property
    def declared_by(self) -> list[str]:
        return [who for who, _ in self.watches]


class WatchConflict(ValueError):
    """Two plugins declare one resource differently (another version, kind or scope,
    or another model): one informer cannot serve both."""


def share_watches(declared: Iterable[tuple[str, ObjectWatch[Any]]]) -> list[SharedWatch]:
    """One ``SharedWatch`` per resource (group and plural), in the order first declared.
    Raises ``WatchConflict`` naming both plugins when one resource is declared at two
    versions, with two kinds or scopes, or with two models (declare one model of the
    resource in ``troupe.api`` and share it)."""
    shared: dict[tuple[str, str], SharedWatch] = {}
    for who, watch in declared:
        key = (watch.kind.group, watch.kind.resource)
        first = shared.get(key)
        if first is None:
            shared[key] = SharedWatch(watch.kind, watch.model, ((who, watch),))
            continue
        other = first.declared_by[0]
        if watch.kind != first.kind:
            raise WatchConflict(
                f"{who} watches {watch.kind} ({watch.kind.kind}, "
                f"{_scope(watch.kind)}) but {other} watches {first.kind} "
                f"({first.kind.kind}, {_scope(first.kind)}): one version per resource"
            )
        if watch.model is not first.model:
            raise WatchConflict(
                f"{who} parses {watch.kind} into {_name(watch.model)} but {other} into "
                f"{_name(first.model)}: plugins watching one resource share one model"
            )
        shared[key] = SharedWatch(first.kind, first.model, (*first.watches, (who, watch)))
    return list(shared.values())


def _scope(kind: ObjectKind) -> str:
    return "namespaced" if kind.namespaced else "cluster-scoped"


def _name(model: type[Any]) -> str:
    return f"{model.__module__}.{model.__qualname__}"
