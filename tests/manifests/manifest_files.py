"""Reading ``manifests/`` for the manifest tests: every YAML document with its file,
and lookups by kind and name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
NAMESPACE = "troupe-system"
SCHEDULER_NAME = "troupe-scheduler"


@dataclass(frozen=True)
class Manifest:
    path: Path
    doc: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.doc.get("kind", ""))

    @property
    def name(self) -> str:
        return str(self.doc.get("metadata", {}).get("name", ""))

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}: {self.kind}/{self.name}"


def yaml_files() -> list[Path]:
    return sorted(MANIFESTS.rglob("*.yaml"))


def load_all() -> list[Manifest]:
    out = []
    for path in yaml_files():
        with path.open(encoding="utf-8") as fh:
            out += [Manifest(path, doc) for doc in yaml.safe_load_all(fh) if doc is not None]
    return out


def installed() -> list[Manifest]:
    """The objects ``kubectl apply -k manifests/`` creates (not examples, not kustomize's own)."""
    return [m for m in load_all() if "examples" not in m.path.parts and m.kind != "Kustomization"]


def one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [m.doc for m in installed() if m.kind == kind and name in (None, m.name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def scheduler_config_text() -> str:
    """The KubeSchedulerConfiguration inside the ConfigMap."""
    data = one("ConfigMap", "troupe-scheduler-config")["data"]
    assert isinstance(data, dict) and list(data) == ["config.yaml"]
    return str(data["config.yaml"])
