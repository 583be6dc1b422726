"""Reading a cluster's scheduling state: the one reader of ``troupe snapshot``, of
``troupe explain`` (its capacity, its fixes and its ``--offline`` diagnosis) and so,
through the snapshot file, of ``troupe replay``.

``read_cluster`` connects (``troupe.kube.connect``) and returns a ``Snapshot``
(``troupe.sim.snapshot_file``): nodes, pods, namespaces, PriorityClasses,
PodDisruptionBudgets and every gang object the cluster serves — scheduler-plugins
PodGroups, and the ``scheduling.k8s.io`` Workloads, PodGroups and CompositePodGroups at
the version troupe itself would watch, found through API discovery
(``troupe.kube.discovery.served_gang_versions``, as the daemon does at start-up) —
each collection in pages (``limit`` / ``continue``, as client-go's pager). Secrets and
ConfigMaps are never read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from troupe.api.client import ApiError
from troupe.api.gangapi import (
    COMPOSITE_POD_GROUP_V1ALPHA3,
    COMPOSITE_POD_GROUPS_PLURAL,
    POD_GROUP_V1BETA1,
    WORKLOAD_TEMPLATES_PLURAL,
)
from troupe.api.gangs import GangApi
from troupe.kube.connection import connect
from troupe.kube.discovery import served_gang_versions, served_templates_version, serves
from troupe.kube.errors import KubeConnectionError
from troupe.kube.gang_informers import GANG_PATHS
from troupe.kube.transport import HttpTransport, Transport
from troupe.sim.snapshot_file import Snapshot
from troupe.whatif.errors import WhatIfError

PAGE_SIZE: Final = 500
Progress = Callable[[str, int], None]
"""(resource, objects read so far)."""

# Snapshot resource name -> (list path, apiVersion, kind) of the fixed kinds.
FIXED: Final = {
    "namespaces": ("/api/v1/namespaces", "v1", "Namespace"),
    "priorityclasses": (
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        "scheduling.k8s.io/v1",
        "PriorityClass",
    ),
    "nodes": ("/api/v1/nodes", "v1", "Node"),
    "poddisruptionbudgets": (
        "/apis/policy/v1/poddisruptionbudgets",
        "policy/v1",
        "PodDisruptionBudget",
    ),
    "pods": ("/api/v1/pods", "v1", "Pod"),
}


async def list_all(
    transport: Transport,
    path: str,
    api_version: str,
    kind: str,
    *,
    page_size: int = PAGE_SIZE,
    on_page: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Every object of a collection, page by page; each with apiVersion and kind set
    (list items carry neither)."""
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        query = {"limit": str(page_size), **({"continue": token} if token else {})}
        resp = await transport.request("GET", path, query=query)
        if not resp.ok:
            raise resp.error(f"list {path}")
        page = json.loads(resp.body)
        for item in page.get("items") or []:
            # Field ownership is bulk the scheduler never reads.
            (item.get("metadata") or {}).pop("managedFields", None)
            items.append({"apiVersion": api_version, "kind": kind, **item})
        if on_page is not None:
            on_page(len(items))
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


async def gang_collections(
    transport: Transport,
) -> tuple[dict[str, str], list[tuple[str, str, str, str]]]:
    """(gang API -> version captured, [(resource, path, apiVersion, kind)])."""
    versions = await served_gang_versions(transport)
    out: list[tuple[str, str, str, str]] = []
    for api, version in versions.items():
        if api is GangApi.COSCHEDULING:
            out.append(("coschedulingpodgroups", GANG_PATHS[api], version, "PodGroup"))
        elif api is GangApi.WORKLOAD:
            out.append(("workloads", GANG_PATHS[api], version, "Workload"))
        else:
            out.append(("podgroups", f"/apis/{version}/podgroups", version, "PodGroup"))
            # The Workloads whose templates PodGroups name, at the version troupe
            # watches beside the PodGroup's (v1alpha3 where served at 1.37).
            templates = await served_templates_version(transport, version)
            if templates is not None:
                path = f"/apis/{templates}/{WORKLOAD_TEMPLATES_PLURAL}"
                out.append(("workloads", path, templates, "Workload"))
            if version == POD_GROUP_V1BETA1 and await serves(
                transport,
                COMPOSITE_POD_GROUP_V1ALPHA3,
                COMPOSITE_POD_GROUPS_PLURAL,
                "CompositePodGroup",
            ):
                path = f"/apis/{COMPOSITE_POD_GROUP_V1ALPHA3}/{COMPOSITE_POD_GROUPS_PLURAL}"
                out.append(
                    ("compositepodgroups", path, COMPOSITE_POD_GROUP_V1ALPHA3, "CompositePodGroup")
                )
    return {str(api): v for api, v in versions.items()}, out


async def server_version(transport: Transport) -> str:
    resp = await transport.request("GET", "/version")
    if not resp.ok:
        return ""
    try:
        return str(json.loads(resp.body).get("gitVersion", ""))
    except (ValueError, AttributeError):
        return ""


async def capture(
    transport: Transport, progress: Progress | None = None, *, page_size: int = PAGE_SIZE
) -> tuple[str, dict[str, str], dict[str, list[dict[str, Any]]]]:
    """(server version, gang versions, resource name -> objects)."""
    version = await server_version(transport)
    gang_versions, gang_lists = await gang_collections(transport)
    collections = [(name, *spec) for name, spec in FIXED.items() if name != "pods"]
    collections += gang_lists
    collections.append(("pods", *FIXED["pods"]))
    resources: dict[str, list[dict[str, Any]]] = {}
    for name, path, api_version, kind in collections:
        done = sum(len(v) for v in resources.values())

        def on_page(n: int, name: str = name, done: int = done) -> None:
            if progress is not None:
                progress(name, done + n)

        items = await list_all(
            transport, path, api_version, kind, page_size=page_size, on_page=on_page
        )
        resources.setdefault(name, []).extend(items)
    return version, gang_versions, resources


@dataclass(frozen=True, slots=True)
class ClusterAddress:
    """Where the cluster is: a kubeconfig (None: ``$KUBECONFIG`` or ``~/.kube/config``)
    and its context, or ``master`` overriding its server, or in-cluster credentials."""

    kubeconfig: str | None = None
    master: str | None = None
    context: str | None = None
    in_cluster: bool = False


async def read_cluster(
    address: ClusterAddress, progress: Progress | None = None, *, page_size: int = PAGE_SIZE
) -> Snapshot:
    """The cluster's scheduling state now. Raises ``WhatIfError`` (with the reason the
    connection or a list failed) when it cannot be read."""
    try:
        api = await connect(
            address.kubeconfig,
            address.master,
            address.in_cluster,
            context=address.context,
            pool_size=4,
        )
    except KubeConnectionError as exc:
        raise WhatIfError(str(exc)) from exc
    try:
        taken = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        version, gang_versions, resources = await capture(
            HttpTransport(api), progress, page_size=page_size
        )
    except ApiError as exc:
        raise WhatIfError(str(exc)) from exc
    finally:
        await api.close()
    return Snapshot(
        taken_at=taken,
        server_version=version,
        gang_versions=gang_versions,
        resources=resources,
    )
