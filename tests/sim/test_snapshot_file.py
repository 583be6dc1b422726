"""The ``TroupeSnapshot`` file: written and read back as YAML or JSON by its name;
anything else, or a file holding a Secret or ConfigMap, is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from troupe.sim.snapshot_file import Snapshot, SnapshotError, read_snapshot, write_snapshot

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"}}


@pytest.mark.parametrize("name", ["s.yaml", "s.yml", "s.json", "s"])
def test_round_trip(tmp_path: Path, name: str) -> None:
    snap = Snapshot(
        taken_at="2026-01-01T00:00:00Z",
        server_version="v1.37.0",
        gang_versions={"scheduling.x-k8s.io/v1alpha1": "scheduling.x-k8s.io/v1alpha1"},
        resources={"nodes": [NODE]},
    )
    path = tmp_path / name
    write_snapshot(snap, path)
    text = path.read_text()
    if name.endswith((".yaml", ".yml")):
        assert text.startswith("apiVersion: troupe.dev/v1alpha1\nkind: TroupeSnapshot\n")
    else:
        assert json.loads(text)["kind"] == "TroupeSnapshot"
    back = read_snapshot(path)
    assert back == Snapshot(
        taken_at=snap.taken_at,
        server_version=snap.server_version,
        gang_versions=snap.gang_versions,
        resources={**{key: [] for key in back.resources}, "nodes": [NODE]},
    )


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"kind": "List"}, "not a TroupeSnapshot"),
        ({"kind": "TroupeSnapshot", "apiVersion": "v9"}, "apiVersion 'v9'"),
        (
            {
                "kind": "TroupeSnapshot",
                "apiVersion": "troupe.dev/v1alpha1",
                "resources": {"secrets": []},
            },
            "resources.secrets: not a captured resource",
        ),
        (
            {
                "kind": "TroupeSnapshot",
                "apiVersion": "troupe.dev/v1alpha1",
                "resources": {"pods": [{"kind": "Secret", "metadata": {"name": "x"}}]},
            },
            "holds a Secret",
        ),
    ],
)
def test_refused(tmp_path: Path, doc: object, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SnapshotError, match=message):
        read_snapshot(path)
