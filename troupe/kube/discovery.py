"""Which gang APIs the cluster serves, from API discovery.

The daemon calls ``served_gang_versions(transport)`` once at start-up, before it builds
the gang informers (``gang_informers``), and watches one version per API, the newest
it understands. A kind the cluster does not serve (the
scheduler-plugins CRD not installed, a 1.35 cluster without ``v1alpha2``, the
``GenericWorkload`` feature gate off) is simply not watched, instead of an informer
failing its list forever. It reads legacy discovery, as client-go's
``ServerResourcesForGroupVersion`` does: ``GET /apis`` for the group versions, then
``GET /apis/<group>/<version>`` for the resources of each candidate; a 404 at either
step means "not served". ``served_templates_version`` picks the version of the
template Workloads watched beside the standalone PodGroup the same way.

``served_kinds`` answers the same question for the resources plugins watch
(``troupe.kube.object_informers``): one discovery request per group version
(``/api/v1`` for the core group), asked only when some plugin watches something.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from troupe.api.gangapi import WORKLOAD_TEMPLATES_PLURAL
from troupe.api.gangapi_kinds import (
    MODEL_OF,
    PLURAL_OF,
    TEMPLATES_VERSIONS_OF,
    VERSIONS_OF,
)
from troupe.api.gangs import GangApi
from troupe.api.watches import ObjectKind
from troupe.kube.transport import Transport


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class _GroupVersion(_Wire):
    group_version: str = Field(default="", alias="groupVersion")


class _ApiGroup(_Wire):
    versions: list[_GroupVersion] = Field(default_factory=list)


class _ApiGroupList(_Wire):
    groups: list[_ApiGroup] = Field(default_factory=list)


class _ApiResource(_Wire):
    name: str = ""
    kind: str = ""


class _ApiResourceList(_Wire):
    resources: list[_ApiResource] = Field(default_factory=list)


_KIND_OF: Final = {api: model().kind for api, model in MODEL_OF.items()}


async def served_gang_apis(transport: Transport, *, timeout: float = 30.0) -> set[GangApi]:
    """The gang APIs whose kind the API server serves (at any version)."""
    return set(await served_gang_versions(transport, timeout=timeout))


async def served_gang_versions(
    transport: Transport, *, timeout: float = 30.0
) -> dict[GangApi, str]:
    """For each gang API the server serves, the one version to watch: the newest troupe
    understands (``VERSIONS_OF``: v1beta1 before v1alpha2 for the standalone PodGroup).
    A real API server shows one object at every served version of its resource, so
    watching two versions would see every group twice. Raises ``ApiError`` when
    discovery itself fails (no reply, 5xx, 403): guessing would either watch a kind
    that is not there or silently ignore one that is."""
    resp = await transport.request("GET", "/apis", timeout=timeout)
    if resp.status == 404:
        return {}
    if not resp.ok:
        raise resp.error("discovery of /apis")
    listed = {
        gv.group_version
        for group in _ApiGroupList.model_validate_json(resp.body).groups
        for gv in group.versions
    }
    served: dict[GangApi, str] = {}
    for api in GangApi:
        for version in VERSIONS_OF[api]:
            if version in listed and await serves(
                transport, version, PLURAL_OF[api], _KIND_OF[api], timeout=timeout
            ):
                served[api] = version
                break
    return served


async def served_templates_version(
    transport: Transport, pod_group_version: str, *, timeout: float = 30.0
) -> str | None:
    """The one version of the template Workload to watch beside the standalone PodGroup
    at ``pod_group_version``: the newest of ``TEMPLATES_VERSIONS_OF`` the server serves
    (``v1alpha3`` before ``v1beta1`` at 1.37: the same Workload plus its
    ``compositePodGroupTemplates``), None when it serves none."""
    for version in TEMPLATES_VERSIONS_OF.get(pod_group_version, (pod_group_version,)):
        if await serves(transport, version, WORKLOAD_TEMPLATES_PLURAL, "Workload", timeout=timeout):
            return version
    return None


async def serves(
    transport: Transport, group_version: str, plural: str, kind: str, *, timeout: float = 30.0
) -> bool:
    """Whether ``group_version`` serves ``plural`` of ``kind`` (a 404 means no)."""
    resp = await transport.request("GET", f"/apis/{group_version}", timeout=timeout)
    if resp.status == 404:
        return False
    if not resp.ok:
        raise resp.error(f"discovery of /apis/{group_version}")
    resources = _ApiResourceList.model_validate_json(resp.body).resources
    return any(r.name == plural and r.kind == kind for r in resources)


async def served_kinds(
    transport: Transport, kinds: Iterable[ObjectKind], *, timeout: float = 30.0
) -> set[ObjectKind]:
    """Which of ``kinds`` the server serves: its discovery document for the kind's
    group version lists the resource with that kind (a 404 for the group version means
    none of its kinds). Raises ``ApiError`` when discovery itself fails."""
    wanted = list(kinds)
    served: set[ObjectKind] = set()
    for group_version in dict.fromkeys(k.group_version for k in wanted):
        path = f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"
        resp = await transport.request("GET", path, timeout=timeout)
        if resp.status == 404:
            continue
        if not resp.ok:
            raise resp.error(f"discovery of {path}")
        listed = {
            (r.name, r.kind) for r in _ApiResourceList.model_validate_json(resp.body).resources
        }
        served.update(
            k for k in wanted if k.group_version == group_version and (k.resource, k.kind) in listed
        )
    return served
