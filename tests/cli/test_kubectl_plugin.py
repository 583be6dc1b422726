"""``kubectl troupe``: the plugin's arguments, its krew manifest and launcher, and the
real kubectl finding it on PATH (its commands against a cluster are end to end in
tests/integration/test_explain_live_e2e.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from troupe.cli.kubectl_plugin import build_parser

ROOT = Path(__file__).resolve().parents[2]
KREW = ROOT / "plugins" / "krew.yaml"
LAUNCHER = ROOT / "plugins" / "kubectl-troupe"


def test_kubectls_conventions_for_the_cluster_and_namespace() -> None:
    args = build_parser().parse_args(
        ["explain", "podgroup", "train", "-n", "ml", "--kubeconfig", "k", "--context", "c"]
    )
    assert (args.command, args.kind, args.target) == ("explain", "podgroup", "train")
    assert (args.namespace, args.kubeconfig, args.context) == ("ml", "k", "c")
    snap = build_parser().parse_args(["snapshot", "-o", "f.yaml", "--context", "c"])
    assert (snap.command, snap.output, snap.context) == ("snapshot", "f.yaml", "c")
    assert build_parser().parse_args(["replay", "f.yaml"]).file == "f.yaml"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run"])  # the daemon is not a plugin command


def test_the_krew_manifest_installs_the_launcher_as_kubectl_troupe() -> None:
    doc = yaml.safe_load(KREW.read_text())
    assert doc["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert (doc["kind"], doc["metadata"]["name"]) == ("Plugin", "troupe")
    spec = doc["spec"]
    assert len(spec["shortDescription"]) <= 50
    for platform in spec["platforms"]:
        assert platform["bin"] == "kubectl-troupe"
        sources = [f["from"] for f in platform["files"]]
        assert all((ROOT / src).exists() for src in sources), sources
        assert "plugins/kubectl-troupe" in sources
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'kubectl-troupe = "troupe.cli.kubectl_plugin:plugin_entry"' in pyproject


def test_kubectl_finds_the_plugin_and_the_krew_launcher_runs_it(tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is required for this test (scripts/test installs it)"
    # The console script installed with the package, first on PATH.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin"}
    done = subprocess.run(
        [kubectl, "troupe", "version"], capture_output=True, text=True, env=env, timeout=60
    )
    assert (done.returncode, done.stdout.split()[0]) == (0, "kubectl-troupe"), done.stderr
    listed = subprocess.run(
        [kubectl, "plugin", "list"], capture_output=True, text=True, env=env, timeout=60
    )
    assert f"{Path(sys.executable).parent}/kubectl-troupe" in listed.stdout
    # The krew launcher, linked as kubectl-troupe, runs the installed package.
    bin_dir = tmp_path / "krew-bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl-troupe").symlink_to(LAUNCHER)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin",
           "TROUPE_PYTHON": sys.executable}  # fmt: skip
    done = subprocess.run(
        [kubectl, "troupe", "explain", "--help"], capture_output=True, text=True, env=env,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: kubectl troupe explain")
    assert "--context" in done.stdout and "-n NAMESPACE" in done.stdout
