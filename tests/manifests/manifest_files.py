"""Reading ``manifests/`` for the manifest tests: every YAML document with its file,
what ``kubectl kustomize`` renders from them (``installed``: the default install plus
the optional Prometheus Operator component, as a user's overlay adds it), and lookups
by kind and name in that rendering."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
PROMETHEUS_COMPONENT = MANIFESTS / "components" / "prometheus"
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


def kubectl() -> str:
    found = shutil.which("kubectl")
    assert found, "kubectl is needed to render manifests/ (scripts/ensure-kubectl installs it)"
    return found


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize DIRECTORY``, as documents."""
    out = subprocess.run(
        [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, check=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d is not None]


def overlay_kustomization(base: Path, components: list[Path], at: Path) -> str:
    """A user's overlay at ``at``: ``base`` with ``components`` (kustomize wants paths
    relative to the overlay)."""
    rel = [os.path.relpath(p, at) for p in (base, *components)]
    return (
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{rel[0]}]\ncomponents: [{', '.join(rel[1:])}]\n"
    )


def kustomize_with(components: list[Path], base: Path = MANIFESTS) -> list[dict[str, Any]]:
    """What an overlay adding ``components`` to ``base`` renders."""
    with tempfile.TemporaryDirectory() as tmp:
        overlay = Path(tmp)
        (overlay / "kustomization.yaml").write_text(
            overlay_kustomization(base, components, overlay)
        )
        return kustomize(overlay)


@functools.cache
def _rendered() -> tuple[dict[str, Any], ...]:
    return tuple(kustomize_with([PROMETHEUS_COMPONENT]))


@functools.cache
def default_install() -> tuple[dict[str, Any], ...]:
    """``kubectl kustomize manifests/``: what ``kubectl apply -k manifests/`` creates."""
    return tuple(kustomize(MANIFESTS))


def load_all() -> list[Manifest]:
    out = []
    for path in yaml_files():
        with path.open(encoding="utf-8") as fh:
            out += [Manifest(path, doc) for doc in yaml.safe_load_all(fh) if doc is not None]
    return out


def installed() -> list[Manifest]:
    """The objects an install with the Prometheus Operator component creates, as
    ``kubectl kustomize`` renders them (generated ConfigMaps with their hashed names)."""
    where = MANIFESTS / "kustomization.yaml"
    return [Manifest(where, doc) for doc in _rendered()]


def one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [m.doc for m in installed() if m.kind == kind and name in (None, m.name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def profile_config_map() -> dict[str, Any]:
    """The generated ConfigMap of the profile (``troupe-scheduler-config-<hash>``)."""
    found = [
        m.doc
        for m in installed()
        if m.kind == "ConfigMap" and m.name.startswith("troupe-scheduler-config-")
    ]
    assert len(found) == 1, f"expected one profile ConfigMap, found {len(found)}"
    return found[0]


def scheduler_config_text() -> str:
    """The KubeSchedulerConfiguration inside the ConfigMap."""
    data = profile_config_map()["data"]
    assert isinstance(data, dict) and list(data) == ["config.yaml"]
    return str(data["config.yaml"])
