"""``troupe sim --serve`` in a process of its own, as a user starts it, for the tests
that drive it with the real kubectl and the ``troupe`` / ``kubectl troupe`` commands."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

VENV_BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Served:
    kubeconfig: Path
    stderr: Path

    def env(self) -> dict[str, str]:
        """The environment of a user of this cluster: KUBECONFIG set, and the venv's
        ``bin`` first on PATH so kubectl finds the ``kubectl-troupe`` plugin."""
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }


@contextmanager
def troupe_sim_serve(tmp: Path, *args: str) -> Iterator[Served]:
    kubeconfig, stderr = tmp / "kubeconfig", tmp / "sim.stderr"
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "troupe", "sim", "--serve", "--kubeconfig-out",
             str(kubeconfig), *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while b"troupe sim: serving" not in stderr.read_bytes():
            assert proc.poll() is None, stderr.read_text()
            assert time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.05)
        yield Served(kubeconfig, stderr)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def kubectl_path() -> str:
    found = shutil.which("kubectl")
    assert found, "kubectl is required for this test (scripts/test installs it)"
    return found


def run(served: Served, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """A command as the user types it, in the cluster's environment."""
    return subprocess.run(
        list(argv), input=stdin, capture_output=True, text=True, env=served.env(), timeout=180
    )


def kubectl(served: Served, *args: str, stdin: str | None = None) -> str:
    done = run(served, kubectl_path(), *args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return done.stdout
