"""Kubeconfig files pointing at the embedded API server.

The cluster entry names the server URL (plain HTTP on loopback), the user has no
credentials or a bearer token (``troupe sim --serve`` writes one its API server
authenticates, so clients' credentials reach the scheduler's delegated debug
endpoint), one context ties them together and is current. kubectl and
``kubernetes_asyncio.config.load_kube_config`` read it. Written by
``ApiServer.write_kubeconfig`` and ``troupe sim``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

DEFAULT_NAME: Final = "troupe-sim"


def kubeconfig_text(
    server_url: str, *, name: str = DEFAULT_NAME, namespace: str = "default", token: str = ""
) -> str:
    # JSON is valid YAML; quoting every scalar avoids YAML type surprises.
    def q(value: str) -> str:
        return json.dumps(value)

    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        f"- name: {q(name)}\n"
        "  cluster:\n"
        f"    server: {q(server_url)}\n"
        "contexts:\n"
        f"- name: {q(name)}\n"
        "  context:\n"
        f"    cluster: {q(name)}\n"
        f"    user: {q(name)}\n"
        f"    namespace: {q(namespace)}\n"
        f"current-context: {q(name)}\n"
        "users:\n"
        f"- name: {q(name)}\n"
        + (f"  user:\n    token: {q(token)}\n" if token else "  user: {}\n")
        + "preferences: {}\n"
    )


def write_kubeconfig(
    path: str | Path, server_url: str, *, name: str = DEFAULT_NAME, token: str = ""
) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(kubeconfig_text(server_url, name=name, token=token))
    if token:
        target.chmod(0o600)  # a credential, as kubectl writes its own
    return target
