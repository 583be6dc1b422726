"""The registry of resource types the embedded API server serves.

One ``ResourceType`` per (group, version, plural): its kind, list kind, scope, short
names, subresources and the field selectors it supports. The server routes requests,
builds discovery documents and validates field selectors from it; the store keys its
objects by ``ResourceType.key``. Creating a CustomResourceDefinition registers new types
here (``Registry.add``) and deleting it removes them.

Kind keys (``KindKey``) name a stored resource for in-process callers: the plural for
core v1 (``"pods"``), ``"<plural>.<group>"`` otherwise (``"podgroups.scheduling.x-k8s.io"``)
and ``"<plural>.<version>.<group>"`` where one group serves the same plural at several
versions with different schemas (the two built-in ``workloads.scheduling.k8s.io``).
events.k8s.io/v1 Events share the core ``"events"`` storage (``shares_storage_of``); the
alias ``"events.events.k8s.io"`` still resolves to their type. The v1alpha2 and v1alpha3
Workloads share the v1beta1 Workload's storage, and both PodGroup versions share
``"podgroups.scheduling.k8s.io"`` (``storage/conversion.py`` converts); a kind key with a version
(``"workloads.v1alpha2.scheduling.k8s.io"``) names that version's view.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final, NewType

KindKey = NewType("KindKey", str)

STANDARD_VERBS: Final = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)
SUBRESOURCE_VERBS: Final = {
    "status": ("get", "patch", "update"),
    "binding": ("create",),
    "eviction": ("create",),
}
SUBRESOURCE_KINDS: Final = {
    "binding": ("", "v1", "Binding"),
    "eviction": ("policy", "v1", "Eviction"),
}
META_FIELDS: Final = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    # Field selectors beyond metadata.name/namespace (the type's field label conversion).
    field_labels: tuple[str, ...] = ()
    # Core kinds with their own field label conversion answer an unknown field with
    # "field label not supported: X"; the default conversion with "X is not a known ...".
    own_field_conversion: bool = False
    # Some own conversions name the kind: "field label not supported for <gvk>: X".
    field_error_names_kind: bool = False
    categories: tuple[str, ...] = ()
    allow_create_on_update: bool = False
    allow_unconditional_update: bool = True
    # DELETE answers with the object (genericregistry.Store.ReturnDeletedObject).
    return_deleted_object: bool = False
    # Distinct storage for one plural served at several versions with different schemas.
    versioned_key: bool = False
    # Nodes keep the status they are registered with; other kinds with a status
    # subresource start with an empty one (their strategies' PrepareForCreate).
    keeps_status_on_create: bool = False
    # The status.phase a new object starts in (PersistentVolumes and claims: Pending);
    # with ``stamps_phase_transition`` also status.lastPhaseTransitionTime (PVs).
    initial_phase: str = ""
    stamps_phase_transition: bool = False
    # Built into the server (strategic merge patch allowed), not from a CRD.
    builtin: bool = True
    # Another type's kind key whose storage this one shares (a view converted by
    # conversion.py): events.k8s.io/v1 Events are core v1 Events.
    shares_storage_of: str = ""
    # The verbs discovery advertises; ``("create",)`` for the review kinds, which are
    # answered by ``ApiServer.reviews`` (``endpoints/reviews.py``) and never stored.
    verbs: tuple[str, ...] = STANDARD_VERBS
    key: KindKey = field(init=False)

    def __post_init__(self) -> None:
        if self.shares_storage_of:
            key = self.shares_storage_of
        elif not self.group:
            key = self.plural
        elif self.versioned_key:
            key = f"{self.plural}.{self.version}.{self.group}"
        else:
            key = f"{self.plural}.{self.group}"
        object.__setattr__(self, "key", KindKey(key))

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def group_resource(self) -> str:
        """``schema.GroupResource.String()``: ``pods`` or ``priorityclasses.scheduling.k8s.io``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def storage_key(self, namespace: str, name: str) -> str:
        """The etcd key upstream would use (it appears in storage error messages)."""
        prefix = (
            f"/registry/{self.group}/{self.plural}" if self.group else f"/registry/{self.plural}"
        )
        return f"{prefix}/{namespace}/{name}" if self.namespaced else f"{prefix}/{name}"

    def supports_field(self, label: str) -> bool:
        return label in META_FIELDS or label in self.field_labels

    def field_error(self, label: str) -> str:
        if self.field_error_names_kind:
            return f"field label not supported for {self.api_version}, Kind={self.kind}: {label}"
        if self.own_field_conversion:
            return f"field label not supported: {label}"
        return (
            f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'
        )


class Registry:
    """Served types by (group, version, plural) and by kind key; CRDs come and go."""

    def __init__(self, types: Iterable[ResourceType] = ()) -> None:
        self._by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        self._by_key: dict[str, list[ResourceType]] = {}
        # "<plural>.<group>" of types that share another's storage key.
        self._aliases: dict[str, ResourceType] = {}
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._by_gvr[(rt.group, rt.version, rt.plural)] = rt
        self._by_key.setdefault(rt.key, []).append(rt)
        if rt.shares_storage_of:
            # The first view keeps the alias (``workloads.scheduling.k8s.io``: v1alpha2).
            self._aliases.setdefault(f"{rt.plural}.{rt.group}", rt)

    def remove(self, rt: ResourceType) -> None:
        self._by_gvr.pop((rt.group, rt.version, rt.plural), None)
        served = self._by_key.get(rt.key, [])
        if rt in served:
            served.remove(rt)
        if not served:
            self._by_key.pop(rt.key, None)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, plural))

    def resolve(self, name: str) -> ResourceType:
        """A kind key or alias (``pods``, ``podgroups.scheduling.x-k8s.io``,
        ``workloads.v1alpha2.scheduling.k8s.io``) to its storage version's type."""
        served = self._by_key.get(name)
        if served:
            return served[0]
        alias = self._aliases.get(name)
        if alias is not None:
            return alias
        plural, _, rest = name.partition(".")
        version, _, group = rest.partition(".")
        rt = self._by_gvr.get((group, version, plural))
        if rt is None:
            raise KeyError(f"no served resource type {name!r}")
        return rt

    def versions_of(self, key: KindKey) -> list[ResourceType]:
        return list(self._by_key.get(key, []))

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._by_gvr.values()))

    def has_key(self, key: str) -> bool:
        return key in self._by_key
