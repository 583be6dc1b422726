"""Namespace and CustomResourceDefinition behaviour, and the store factory.

* Namespaces: default ``spec.finalizers`` and ``status.phase: Active``; the three system
  namespaces cannot be deleted (upstream's NamespaceLifecycle admission); deleting a
  namespace deletes its contents at once (upstream's namespace controller does it
  asynchronously while the namespace is Terminating).
* CRDs: creating one registers a ``ResourceType`` per served version (scope, status
  subresource, short names) so the server serves and advertises it; the status reports
  NamesAccepted and Established at once. Deleting it deletes every custom object of the
  kind, ends open watches and stops serving it.

``new_store`` builds a ``Store`` with these, the pod, Event, PodGroup, Workload and
RBAC binding strategies and the disruption controller installed and the bootstrap
objects (system namespaces, system PriorityClasses, the bootstrap RBAC roles of
``rbac_objects.py``) created; ``workload_versions`` picks which
``scheduling.k8s.io`` versions of Workload, PodGroup and CompositePodGroup it serves (a
1.35 or 1.36 cluster serves no v1beta1 and no v1alpha3). ``ApiServer`` calls it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from troupe.api.clock import Clock
from troupe.sim.apiserver import errors
from troupe.sim.apiserver.composite_strategy import CompositePodGroupStrategy
from troupe.sim.apiserver.disruption import DisruptionController
from troupe.sim.apiserver.event_strategy import EventStrategy
from troupe.sim.apiserver.events import ADDED, DELETED, MODIFIED, WatchEvent
from troupe.sim.apiserver.podgroup_strategy import PodGroupStrategy
from troupe.sim.apiserver.pods import SYSTEM_PRIORITY_CLASSES, PodStrategy
from troupe.sim.apiserver.rbac_objects import install as install_rbac
from troupe.sim.apiserver.resources import Registry, ResourceType
from troupe.sim.apiserver.store import Obj, Store, Strategy
from troupe.sim.apiserver.workload_strategy import WorkloadStrategy

# The versions of the native Workload, PodGroup and CompositePodGroup a Kubernetes 1.37
# cluster serves (v1alpha3: the CompositePodGroup only).
WORKLOAD_VERSIONS: Final = ("v1alpha1", "v1alpha2", "v1beta1", "v1alpha3")
_NATIVE_KINDS: Final = ("Workload", "PodGroup", "CompositePodGroup")
SYSTEM_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")
_UNDELETABLE: Final = ("default", "kube-system", "kube-public")


class NamespaceStrategy(Strategy[Store]):
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


class CRDStrategy(Strategy[Store]):
    def __init__(self) -> None:
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


def new_store(
    *,
    history: int = 10000,
    clock: Clock | None = None,
    workload_versions: Iterable[str] = WORKLOAD_VERSIONS,
) -> Store:
    """A store with every strategy installed and the bootstrap objects created."""
    registry = Registry()
    wanted = set(workload_versions)
    for rt in list(registry):
        native = rt.group == "scheduling.k8s.io" and rt.kind in _NATIVE_KINDS
        if native and rt.version not in wanted:
            registry.remove(rt)
    store = Store(registry, history=history, clock=clock)
    strategies: tuple[tuple[str, Strategy[Store]], ...] = (
        ("podgroups", PodGroupStrategy()),
        ("workloads", WorkloadStrategy()),
        ("compositepodgroups", CompositePodGroupStrategy()),
    )
    for plural, strategy in strategies:
        for rt in store.registry:
            if rt.group == "scheduling.k8s.io" and rt.plural == plural:
                store.set_strategy(rt.key, strategy)
    store.set_strategy("pods", PodStrategy())
    store.set_strategy("namespaces", NamespaceStrategy())
    store.set_strategy("events", EventStrategy())
    DisruptionController(store)
    store.set_strategy("customresourcedefinitions.apiextensions.k8s.io", CRDStrategy())
    for namespace in SYSTEM_NAMESPACES:
        store.create("namespaces", {"metadata": {"name": namespace}}, copy=False)
    for name, value, description in SYSTEM_PRIORITY_CLASSES:
        pc: dict[str, Any] = {
            "metadata": {"name": name},
            "value": value,
            "description": description,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        store.create("priorityclasses.scheduling.k8s.io", pc, copy=False)
    install_rbac(store)
    return store
