"""Discovery documents built from the live resource registry.

Legacy discovery (``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>``, ``/apis/<g>/<v>``) and
aggregated discovery v2 (``APIGroupDiscoveryList``, answered when the client's Accept
header asks for it, as kubectl 1.30+ does), plus ``/version``. Versions are ordered by
upstream's version priority (GA before beta before alpha, higher numbers first); the
first is the preferred version. CRD kinds appear and disappear with their CRDs.
``/version`` reports 1.37 when a 1.37 API is served, 1.36 otherwise.
"""

from __future__ import annotations

import re
from typing import Any, Final

from troupe.sim.apiserver.machinery.resources import (
    SUBRESOURCE_KINDS,
    SUBRESOURCE_VERBS,
    Registry,
    ResourceType,
)

_VERSION_INFO: Final = {
    "major": "1",
    "emulationMajor": "1",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
# (group, version, plural) first served by Kubernetes 1.37: the server reports 1.37 when
# it serves one of them (``SimCluster(workload_versions=...)`` without them is 1.36).
_SINCE_1_37: Final = (
    ("scheduling.k8s.io", "v1beta1", "workloads"),
    ("scheduling.k8s.io", "v1beta1", "podgroups"),
    ("scheduling.k8s.io", "v1alpha3", "workloads"),
    ("scheduling.k8s.io", "v1alpha3", "compositepodgroups"),
)
AGGREGATED_CONTENT_TYPE: Final = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
)
_VERSION_RE: Final = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?")


def kube_minor(registry: Registry) -> int:
    """The Kubernetes minor version whose APIs the registry serves: 37 or 36."""
    return 37 if any(registry.lookup(*gvr) is not None for gvr in _SINCE_1_37) else 36


def version_info(registry: Registry) -> dict[str, str]:
    """The ``/version`` document of a server serving ``registry``."""
    minor = str(kube_minor(registry))
    return {
        **_VERSION_INFO,
        "minor": minor,
        "emulationMinor": minor,
        "gitVersion": f"v1.{minor}.0-troupe-sim",
    }


def version_priority(version: str) -> tuple[int, int, int]:
    """Sort key (ascending = preferred first) of ``version.CompareKubeAwareVersionStrings``."""
    match = _VERSION_RE.fullmatch(version)
    if match is None:
        return (3, 0, 0)
    major = int(match.group(1))
    stability = {None: 0, "beta": 1, "alpha": 2}[match.group(2)]
    minor = int(match.group(3) or 0)
    return (stability, -major, -minor)


def _groups(registry: Registry) -> dict[str, dict[str, list[ResourceType]]]:
    groups: dict[str, dict[str, list[ResourceType]]] = {}
    for rt in registry:
        groups.setdefault(rt.group, {}).setdefault(rt.version, []).append(rt)
    return {
        group: dict(sorted(versions.items(), key=lambda item: version_priority(item[0])))
        for group, versions in sorted(groups.items())
    }


def _group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _api_group(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": _group_version(group, v), "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_api_group(g, list(vs)) for g, vs in _groups(registry).items() if g],
    }


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    versions = _groups(registry).get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(group, list(versions))}


def _resource_entries(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    entries = [main]
    for sub in sorted(rt.subresources):
        entry: dict[str, Any] = {
            "name": f"{rt.plural}/{sub}",
            "singularName": "",
            "namespaced": rt.namespaced,
        }
        if sub in SUBRESOURCE_KINDS:
            group, version, kind = SUBRESOURCE_KINDS[sub]
            if group:
                entry["group"], entry["version"] = group, version
            entry["kind"] = kind
        else:
            entry["kind"] = rt.kind
        entry["verbs"] = list(SUBRESOURCE_VERBS[sub])
        entries.append(entry)
    return entries


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = _groups(registry).get(group, {}).get(version)
    if not types:
        return None
    resources = [
        entry for rt in sorted(types, key=lambda t: t.plural) for entry in _resource_entries(rt)
    ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": _group_version(group, version),
        "resources": resources,
    }


def _aggregated_resource(rt: ResourceType) -> dict[str, Any]:
    resource: dict[str, Any] = {
        "resource": rt.plural,
        "responseKind": {"group": "", "version": "", "kind": rt.kind},
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        resource["shortNames"] = list(rt.short_names)
    if rt.categories:
        resource["categories"] = list(rt.categories)
    subresources = []
    for sub in sorted(rt.subresources):
        group, version, kind = SUBRESOURCE_KINDS.get(sub, ("", "", rt.kind))
        subresources.append(
            {
                "subresource": sub,
                "responseKind": {"group": group, "version": version, "kind": kind},
                "verbs": list(SUBRESOURCE_VERBS[sub]),
            }
        )
    if subresources:
        resource["subresources"] = subresources
    return resource


def aggregated(registry: Registry, core: bool) -> dict[str, Any]:
    """``APIGroupDiscoveryList`` of the core group (``/api``) or of all groups (``/apis``)."""
    items = []
    for group, versions in _groups(registry).items():
        if bool(group) == core:
            continue
        items.append(
            {
                "metadata": {"name": group, "creationTimestamp": None},
                "versions": [
                    {
                        "version": version,
                        "resources": [
                            _aggregated_resource(rt) for rt in sorted(types, key=lambda t: t.plural)
                        ],
                        "freshness": "Current",
                    }
                    for version, types in versions.items()
                ],
            }
        )
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }


def wants_aggregated(accept: str) -> bool:
    for part in accept.split(","):
        params = {p.strip() for p in part.split(";")[1:]}
        if (
            "as=APIGroupDiscoveryList" in params
            and "v=v2" in params
            and "g=apidiscovery.k8s.io" in params
        ):
            return True
    return False
