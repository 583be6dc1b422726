"""The ``troupe snapshot`` file: a cluster's scheduling state in one document.

``troupe snapshot`` fills it from a live cluster (``troupe.whatif.read``, which
``troupe explain`` reads a cluster with too); ``troupe replay`` loads it into an
embedded cluster (``troupe.whatif.load``). The envelope::

    apiVersion: troupe.dev/v1alpha1
    kind: TroupeSnapshot
    takenAt: "2026-11-27T17:30:00Z"
    serverVersion: v1.37.0
    gangVersions: {scheduling.x-k8s.io/v1alpha1: scheduling.x-k8s.io/v1alpha1, ...}
    resources:
      nodes: [...]
      pods: [...]
      ...

``resources`` maps a resource name of ``RESOURCES`` to its objects, each a full API
object (``apiVersion``/``kind`` set). Secrets and ConfigMaps are never captured, and a
file holding them is refused. YAML when the file name ends ``.yaml``/``.yml``, JSON
otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

API_VERSION: Final = "troupe.dev/v1alpha1"
KIND: Final = "TroupeSnapshot"

# Resource name -> the store kind it is loaded through, in creation order (namespaces
# and PriorityClasses before the pods that need them, group objects before members).
RESOURCES: Final[dict[str, str]] = {
    "namespaces": "namespaces",
    "priorityclasses": "priorityclasses.scheduling.k8s.io",
    "nodes": "nodes",
    "poddisruptionbudgets": "poddisruptionbudgets.policy",
    "coschedulingpodgroups": "podgroups.scheduling.x-k8s.io",
    "workloads": "workloads.scheduling.k8s.io",
    "compositepodgroups": "compositepodgroups.scheduling.k8s.io",
    "podgroups": "podgroups.scheduling.k8s.io",
    "pods": "pods",
}
GANG_RESOURCES: Final = ("coschedulingpodgroups", "workloads", "compositepodgroups", "podgroups")
NEVER_CAPTURED: Final = frozenset({"Secret", "ConfigMap"})


class SnapshotError(ValueError):
    """A snapshot file that cannot be read or is not a TroupeSnapshot."""


@dataclass(slots=True)
class Snapshot:
    taken_at: str = ""
    server_version: str = ""
    # Gang API -> the version captured (as ``served_gang_versions`` finds it).
    gang_versions: dict[str, str] = field(default_factory=dict)
    resources: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def objects(self, resource: str) -> list[dict[str, Any]]:
        return self.resources.get(resource, [])

    def to_document(self) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "takenAt": self.taken_at,
            "serverVersion": self.server_version,
            "gangVersions": dict(self.gang_versions),
            "resources": {r: self.resources.get(r, []) for r in RESOURCES},
        }

    @classmethod
    def from_document(cls, doc: object, origin: str = "snapshot") -> Snapshot:
        if not isinstance(doc, Mapping) or doc.get("kind") != KIND:
            raise SnapshotError(f"{origin}: not a {KIND} (kind: {_kind(doc)!r})")
        if doc.get("apiVersion") != API_VERSION:
            raise SnapshotError(
                f"{origin}: apiVersion {doc.get('apiVersion')!r}, expected {API_VERSION}"
            )
        resources = doc.get("resources") or {}
        if not isinstance(resources, Mapping):
            raise SnapshotError(f"{origin}: resources must be a mapping")
        out: dict[str, list[dict[str, Any]]] = {}
        for name, items in resources.items():
            if name not in RESOURCES:
                raise SnapshotError(f"{origin}: resources.{name}: not a captured resource")
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise SnapshotError(f"{origin}: resources.{name} must be a list of objects")
            for item in items:
                if item.get("kind") in NEVER_CAPTURED:
                    raise SnapshotError(f"{origin}: resources.{name} holds a {item['kind']}")
            out[name] = list(items)
        return cls(
            taken_at=str(doc.get("takenAt") or ""),
            server_version=str(doc.get("serverVersion") or ""),
            gang_versions={str(k): str(v) for k, v in (doc.get("gangVersions") or {}).items()},
            resources=out,
        )


def _kind(doc: object) -> object:
    return doc.get("kind") if isinstance(doc, Mapping) else type(doc).__name__


def is_yaml(path: str | Path) -> bool:
    return str(path).endswith((".yaml", ".yml"))


def write_snapshot(snapshot: Snapshot, path: str | Path) -> None:
    doc = snapshot.to_document()
    with open(path, "w", encoding="utf-8") as f:
        if is_yaml(path):
            yaml.safe_dump(doc, f, sort_keys=False, default_flow_style=False)
        else:
            json.dump(doc, f, indent=1)
            f.write("\n")


def read_snapshot(path: str | Path) -> Snapshot:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SnapshotError(f"{path}: {exc.strerror or exc}") from exc
    try:
        # JSON is YAML: one parser reads both, whatever the file is called.
        doc = json.loads(text) if not is_yaml(path) else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise SnapshotError(f"{path}: cannot parse: {exc}") from exc
    return Snapshot.from_document(doc, str(path))
