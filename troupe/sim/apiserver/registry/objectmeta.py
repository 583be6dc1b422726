"""Object metadata validation: upstream's ``ValidateObjectMetaAccessor`` and
``ValidateObjectMetaAccessorUpdate`` (k8s.io/apimachinery/pkg/api/validation).

On create: the name by the kind's rule (``content.NameRule``: a DNS subdomain for most
kinds, a DNS label for namespaces and StatefulSets, a DNS-1035 label for services, a
path segment for RBAC objects), ``generateName`` by the same rule as a prefix, and, on
create and update alike, label keys (qualified names) and values, annotation keys and
their total size (256 KiB), owner references and finalizers, each with upstream's
field path and message (``metadata.labels: Invalid value: "a b": name part must
consist of ...``). On update, finalizers cannot be added to an object being deleted;
the immutable fields (name, namespace, uid, timestamps) are kept from the stored object
by ``strategy.merge_update`` instead of being checked. Called by
``generic.GenericStrategy.validate``; values of the wrong JSON type were refused before,
when the body was decoded (``decoding.py``).
"""

from __future__ import annotations

from typing import Any, Final

from troupe.sim.apiserver.machinery.content import NameRule, is_label_value, is_qualified_name
from troupe.sim.apiserver.machinery.field import Cause, forbidden, invalid, required, too_long

TOTAL_ANNOTATION_SIZE_LIMIT: Final = 256 * 1024
_ORPHAN: Final = "orphan"
_FOREGROUND: Final = "foregroundDeletion"
_BANNED_OWNER: Final = ("v1", "Event")


def validate_object_meta(meta: dict[str, Any], names: NameRule) -> list[Cause]:
    """``ValidateObjectMetaAccessor`` (the namespace is resolved by the store)."""
    causes: list[Cause] = []
    generate = meta.get("generateName")
    if generate:
        causes += [invalid("metadata.generateName", generate, m) for m in names(generate, True)]
    name = meta.get("name")
    if not name:
        causes.append(required("metadata.name", "name or generateName is required"))
    else:
        causes += [invalid("metadata.name", name, m) for m in names(name, False)]
    return causes + validate_common(meta)


def validate_object_meta_update(meta: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """``ValidateObjectMetaAccessorUpdate``, for what an update can still change."""
    causes: list[Cause] = []
    if old.get("deletionTimestamp"):
        before = set(old.get("finalizers") or ())
        added = sorted(set(meta.get("finalizers") or ()) - before)
        if added:
            shown = "[]string{" + ", ".join(f'"{f}"' for f in added) + "}"
            causes.append(
                forbidden(
                    "metadata.finalizers",
                    "no new finalizers can be added if the object is being deleted, found "
                    f"new finalizers {shown}",
                )
            )
    return causes + validate_common(meta)


def validate_common(meta: dict[str, Any]) -> list[Cause]:
    """Labels, annotations, owner references and finalizers."""
    causes: list[Cause] = []
    for key, value in (meta.get("labels") or {}).items():
        causes += [invalid("metadata.labels", key, m) for m in is_qualified_name(key)]
        value = value or ""
        causes += [invalid("metadata.labels", value, m) for m in is_label_value(value)]
    annotations = meta.get("annotations") or {}
    size = 0
    for key, value in annotations.items():
        causes += [invalid("metadata.annotations", key, m) for m in is_qualified_name(key.lower())]
        size += len(key.encode()) + len((value or "").encode())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(too_long("metadata.annotations", TOTAL_ANNOTATION_SIZE_LIMIT))
    causes += _owner_references(meta.get("ownerReferences") or [])
    causes += _finalizers(meta.get("finalizers") or [])
    return causes


def _owner_references(refs: list[Any]) -> list[Cause]:
    path = "metadata.ownerReferences"
    causes: list[Cause] = []
    controller = ""
    for ref in refs:
        if not isinstance(ref, dict):
            continue
        api_version, kind = str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
        if not api_version.rpartition("/")[2]:
            causes.append(invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        for field in ("kind", "name", "uid"):
            if not ref.get(field):
                causes.append(invalid(f"{path}.{field}", ref.get(field) or "", "must not be empty"))
        if (api_version, kind) == _BANNED_OWNER:
            causes.append(invalid(path, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            this = f"{kind}/{ref.get('name') or ''}"
            if controller:
                causes.append(
                    invalid(
                        path,
                        refs,
                        'Only one reference can have Controller set to true. Found "true" in '
                        f"references for {controller} and {this}",
                    )
                )
            else:
                controller = this
    return causes


def _finalizers(finalizers: list[Any]) -> list[Cause]:
    path = "metadata.finalizers"
    causes = [
        invalid(path, f, m) for f in finalizers if isinstance(f, str) for m in is_qualified_name(f)
    ]
    if _ORPHAN in finalizers and _FOREGROUND in finalizers:
        causes.append(
            invalid(path, finalizers, f"finalizer {_ORPHAN} and {_FOREGROUND} cannot be both set")
        )
    return causes
