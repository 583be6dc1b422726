"""``scripts/build-image`` builds troupe's image without a Docker daemon or a pulled
base image, and the result starts: ``troupe --version`` and ``troupe validate-config``
on the shipped profile run inside the built root filesystem, mounted read-only, as
UID 65532; the committed image has the Dockerfile's user, entry point and port.

Needs root, mmdebstrap and buildah (CI installs them: ``scripts/ensure-image-tools``);
elsewhere every test here is skipped, saying which is missing and how to run it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from troupe import __version__

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "manifests" / "scheduler-config.yaml"
HOW = "run `sudo scripts/ensure-image-tools && sudo scripts/build-image` (docs/operations.md)"


def missing_tools() -> list[str]:
    missing = [] if os.geteuid() == 0 else ["root"]
    return missing + [t for t in ("mmdebstrap", "buildah", "unshare") if not shutil.which(t)]


@dataclass(frozen=True)
class Built:
    rootfs: Path
    tag: str
    log: str


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    missing = missing_tools()
    if missing:
        pytest.skip(f"building the image needs {', '.join(missing)}: {HOW}")
    rootfs = tmp_path_factory.mktemp("image") / "rootfs"
    tag = f"localhost/troupe-test:{uuid.uuid4().hex[:8]}"
    proc = subprocess.run(
        [str(ROOT / "scripts" / "build-image"), "--rootfs", str(rootfs), "--tag", tag],
        capture_output=True, text=True, timeout=900,
    )
    try:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        yield Built(rootfs, tag, proc.stdout)
    finally:
        subprocess.run(["buildah", "rmi", tag], capture_output=True, check=False)
        shutil.rmtree(rootfs, ignore_errors=True)


def run_in_rootfs(built: Built, profile: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``argv`` in the root filesystem mounted read-only, as UID 65532, with ``profile``
    at /etc/troupe/config.yaml, as the Deployment runs the container."""
    conf = profile.parent
    script = (
        'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && '
        'mount --bind -o ro "$1" "$0/etc/troupe" && mount -t tmpfs tmpfs "$0/tmp" && '
        'shift && exec chroot --userspec=65532:65532 "$ROOTFS" env -i '
        "PATH=/usr/local/bin:/usr/bin:/bin PYTHONDONTWRITEBYTECODE=1 \"$@\""
    )
    return subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, str(built.rootfs), str(conf), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ROOTFS": str(built.rootfs)},
    )


def profile_dir(tmp_path: Path, text: str) -> Path:
    conf = tmp_path / "etc-troupe"
    conf.mkdir()
    (conf / "config.yaml").write_text(text)
    os.chmod(conf, 0o755)
    os.chmod(conf / "config.yaml", 0o644)
    return conf / "config.yaml"


def test_the_build_ran_its_own_smoke_test(built: Built) -> None:
    assert f"troupe {__version__}\nok\n" in built.log
    assert built.log.count(f"troupe {__version__}") == 2  # the rootfs, then the image


def test_troupe_version_runs_read_only_as_65532(built: Built, tmp_path: Path) -> None:
    profile = profile_dir(tmp_path, PROFILE.read_text())
    out = run_in_rootfs(built, profile, "troupe", "--version")
    assert (out.returncode, out.stdout.strip()) == (0, f"troupe {__version__}"), out.stderr
    who = run_in_rootfs(built, profile, "id", "-u")
    assert who.stdout.strip() == "65532"


def test_the_shipped_profile_validates_inside_the_image(built: Built, tmp_path: Path) -> None:
    profile = profile_dir(tmp_path, PROFILE.read_text())
    out = run_in_rootfs(built, profile, "troupe", "validate-config", "/etc/troupe/config.yaml")
    assert (out.returncode, out.stdout.strip()) == (0, "ok"), out.stderr


def test_a_broken_profile_fails_inside_the_image(built: Built, tmp_path: Path) -> None:
    broken = PROFILE.read_text().replace("leaderElect: true", 'leaderElect: "true"')
    profile = profile_dir(tmp_path, broken)
    out = run_in_rootfs(built, profile, "troupe", "validate-config", "/etc/troupe/config.yaml")
    assert out.returncode == 1
    assert "leaderElection.leaderElect: must be a valid boolean" in out.stderr


def test_the_root_filesystem_is_not_written(built: Built, tmp_path: Path) -> None:
    profile = profile_dir(tmp_path, PROFILE.read_text())
    out = run_in_rootfs(built, profile, "sh", "-c", "echo x > /x")
    assert out.returncode != 0 and "Read-only file system" in out.stderr


def test_the_image_has_the_dockerfile_s_contract(built: Built) -> None:
    inspect = subprocess.run(
        ["buildah", "inspect", "--type", "image", built.tag],
        capture_output=True, text=True, check=True,
    )
    config = json.loads(inspect.stdout)["OCIv1"]["config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["troupe"]
    assert config["Cmd"] == ["run", "--config", "/etc/troupe/config.yaml"]
    assert set(config["ExposedPorts"]) == {"10259"}
    assert "PYTHONDONTWRITEBYTECODE=1" in config["Env"]
