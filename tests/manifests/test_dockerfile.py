"""The Dockerfile builds a small non-root image of the scheduler only. There is no
container engine where the tests run, so this reads the file instead of building it."""

from __future__ import annotations

import json
import shlex

from tests.manifests.manifest_files import ROOT, one

LINES = [
    line.strip()
    for line in (ROOT / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
    if line.strip() and not line.lstrip().startswith("#")
]


def _instructions(name: str) -> list[str]:
    return [line.split(None, 1)[1] for line in LINES if line.split(None, 1)[0].upper() == name]


def test_the_final_stage_is_python_slim_and_runs_as_the_deployments_user() -> None:
    assert all(base.startswith("python:3.11-slim") for base in _instructions("FROM"))
    user = _instructions("USER")[-1].split(":")[0]
    pod = one("Deployment")["spec"]["template"]["spec"]
    assert int(user) == pod["securityContext"]["runAsUser"] != 0


def test_the_entrypoint_is_troupe_and_the_port_is_the_deployments() -> None:
    assert json.loads(_instructions("ENTRYPOINT")[-1]) == ["troupe"]
    (container,) = one("Deployment")["spec"]["template"]["spec"]["containers"]
    assert [int(p) for p in _instructions("EXPOSE")] == [
        p["containerPort"] for p in container["ports"]
    ]


def test_pip_installs_the_project_without_test_or_dev_extras() -> None:
    installs = [
        shlex.split(cmd) for run in _instructions("RUN") for cmd in run.split("&&") if "pip" in cmd
    ]
    assert installs and all("." in words for words in installs)
    assert not any("[" in word for words in installs for word in words)


def test_dockerignore_lets_in_only_what_the_build_copies() -> None:
    lines = [
        line
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line and line[0] != "#"
    ]
    assert lines[0] == "*"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = {
        src.rstrip("/")
        for copy in _instructions("COPY")
        if not copy.startswith("--from")
        for src in copy.split()[:-1]
    }
    assert copied == allowed
