"""Running ``python -m bench <command>`` from a test, as a user would: in the
repository, to completion (a failing exit raises), its last line read as the JSON
figures every command prints."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class BenchRun:
    result: dict[str, Any]  # the last line of stdout
    stdout: str
    stderr: str


def run_bench(command: str, *args: str, timeout: float) -> BenchRun:
    run = subprocess.run(
        [sys.executable, "-m", "bench", command, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return BenchRun(json.loads(run.stdout.strip().splitlines()[-1]), run.stdout, run.stderr)
