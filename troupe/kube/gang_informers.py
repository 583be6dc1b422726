"""Informers for the gang API objects the cluster serves.

The daemon discovers the served kinds and the one version of each to watch
(``served_gang_versions``: the newest troupe understands, v1beta1 before v1alpha2 for
the standalone PodGroup, never two versions of one resource), builds one ``Informer``
per kind with ``gang_informers`` — or does both with ``add_gang_informers`` on its
``SharedInformers`` before ``start`` — and passes callbacks that receive the API with
each object, so one set of handlers serves all three kinds (``GangDirectory.upsert`` /
``remove``, and the PodGroup status controller for the scheduler-plugins kind).
Objects are parsed straight into the ``troupe.api.gangapi`` model of their version.
Where the standalone PodGroup is watched, its template Workloads are too (when served),
at one version (``served_templates_version``): v1alpha2 beside the v1alpha2 PodGroup;
beside the v1beta1 PodGroup, v1alpha3 where served (the same Workload plus its
``compositePodGroupTemplates``), else v1beta1. They are delivered as a
``WorkloadTemplates``, ``V1beta1Workload`` or ``V1alpha3Workload`` with the PodGroup's
API: a PodGroup's ``podGroupTemplateRef`` / ``workloadRef`` names its templates, a
CompositePodGroup's ``workloadRef`` its composite template. Where the v1beta1 PodGroup
is watched and the cluster serves the v1alpha3 CompositePodGroup (Kubernetes 1.37,
KEP-6012), composites are watched too, delivered with the PodGroup's API: a v1beta1
PodGroup names its parent composite.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeAlias

from troupe.api.clock import Clock
from troupe.api.gangapi import (
    COMPOSITE_POD_GROUP_V1ALPHA3,
    COMPOSITE_POD_GROUPS_PLURAL,
    POD_GROUP_V1BETA1,
    WORKLOAD_TEMPLATES_PLURAL,
    CompositePodGroup,
)
from troupe.api.gangapi_kinds import (
    MODEL_AT,
    PLURAL_OF,
    TEMPLATES_MODEL_AT,
    GroupObject,
)
from troupe.api.gangs import GangApi
from troupe.kube.discovery import served_gang_versions, served_templates_version, serves
from troupe.kube.informer import Informer, InformerConfig
from troupe.kube.shared import SharedInformers
from troupe.kube.transport import Transport

GroupAdd: TypeAlias = Callable[[GangApi, GroupObject], None]
GroupUpdate: TypeAlias = Callable[[GangApi, GroupObject, GroupObject], None]
GroupDelete: TypeAlias = Callable[[GangApi, GroupObject], None]

# All namespaces: list + watch paths of each kind.
GANG_PATHS: Final = {api: f"/apis/{api.value}/{PLURAL_OF[api]}" for api in GangApi}
TEMPLATES_PATH: Final = f"/apis/{GangApi.POD_GROUP.value}/{WORKLOAD_TEMPLATES_PLURAL}"
COMPOSITES_PATH: Final = f"/apis/{COMPOSITE_POD_GROUP_V1ALPHA3}/{COMPOSITE_POD_GROUPS_PLURAL}"


def gang_informer(
    api: GangApi,
    transport: Transport,
    clock: Clock,
    *,
    on_add: GroupAdd | None = None,
    on_update: GroupUpdate | None = None,
    on_delete: GroupDelete | None = None,
    config: InformerConfig | None = None,
    rng: random.Random | None = None,
    api_version: str = "",
) -> Informer[Any]:
    """An informer of every object of ``api``'s kind at ``api_version`` (default the
    API's own), handlers called with ``api``."""
    version = api_version or api.value
    return _informer_for(
        api,
        transport,
        clock,
        f"/apis/{version}/{PLURAL_OF[api]}",
        MODEL_AT[version],
        f"{PLURAL_OF[api]}.{version}",
        on_add=on_add,
        on_update=on_update,
        on_delete=on_delete,
        config=config,
        rng=rng,
    )


def _informer_for(
    api: GangApi,
    transport: Transport,
    clock: Clock,
    path: str,
    model: type[Any],
    name: str,
    *,
    on_add: GroupAdd | None,
    on_update: GroupUpdate | None,
    on_delete: GroupDelete | None,
    config: InformerConfig | None,
    rng: random.Random | None,
) -> Informer[Any]:
    """An informer of ``path``'s objects whose handlers are called with ``api``."""

    def added(obj: Any) -> None:
        if on_add is not None:
            on_add(api, obj)

    def updated(old: Any, new: Any) -> None:
        if on_update is not None:
            on_update(api, old, new)

    def deleted(obj: Any) -> None:
        if on_delete is not None:
            on_delete(api, obj)

    return Informer(
        transport,
        path,
        model,
        clock,
        on_add=added,
        on_update=updated,
        on_delete=deleted,
        config=config,
        rng=rng,
        name=name,
    )


def gang_informers(
    apis: Iterable[GangApi] | Mapping[GangApi, str],
    transport: Transport,
    clock: Clock,
    *,
    on_add: GroupAdd | None = None,
    on_update: GroupUpdate | None = None,
    on_delete: GroupDelete | None = None,
    config: InformerConfig | None = None,
    rng: random.Random | None = None,
) -> list[Informer[Any]]:
    """One informer per API in ``apis`` (in ``GangApi`` order), at the version
    ``apis`` maps it to when it is a mapping."""
    versions: Mapping[GangApi, str] = apis if isinstance(apis, Mapping) else {}
    wanted = set(apis)
    return [
        gang_informer(
            api,
            transport,
            clock,
            on_add=on_add,
            on_update=on_update,
            on_delete=on_delete,
            config=config,
            rng=rng,
            api_version=versions.get(api, ""),
        )
        for api in GangApi
        if api in wanted
    ]


async def add_gang_informers(
    shared: SharedInformers,
    clock: Clock,
    *,
    on_add: GroupAdd | None = None,
    on_update: GroupUpdate | None = None,
    on_delete: GroupDelete | None = None,
    enabled: Iterable[GangApi] = tuple(GangApi),
    config: InformerConfig | None = None,
    rng: random.Random | None = None,
) -> dict[GangApi, str]:
    """Discover which of the ``enabled`` APIs the cluster serves and add one informer
    per API, at the newest version served, to ``shared`` (before ``shared.start``);
    the APIs watched and their versions."""
    wanted = set(enabled)
    served = {
        api: version
        for api, version in (await served_gang_versions(shared.transport)).items()
        if api in wanted
    }
    for informer in gang_informers(
        served,
        shared.transport,
        clock,
        on_add=on_add,
        on_update=on_update,
        on_delete=on_delete,
        config=config,
        rng=rng,
    ):
        shared.add(informer)
    version = served.get(GangApi.POD_GROUP)
    if version == POD_GROUP_V1BETA1 and await serves(
        shared.transport,
        COMPOSITE_POD_GROUP_V1ALPHA3,
        COMPOSITE_POD_GROUPS_PLURAL,
        "CompositePodGroup",
    ):
        shared.add(
            composites_informer(
                shared.transport,
                clock,
                on_add=on_add,
                on_update=on_update,
                on_delete=on_delete,
                config=config,
                rng=rng,
            )
        )
    templates = (
        await served_templates_version(shared.transport, version) if version is not None else None
    )
    if templates is not None:
        shared.add(
            templates_informer(
                shared.transport,
                clock,
                on_add=on_add,
                on_update=on_update,
                on_delete=on_delete,
                config=config,
                rng=rng,
                api_version=templates,
            )
        )
    return served


def templates_informer(
    transport: Transport,
    clock: Clock,
    *,
    on_add: GroupAdd | None = None,
    on_update: GroupUpdate | None = None,
    on_delete: GroupDelete | None = None,
    config: InformerConfig | None = None,
    rng: random.Random | None = None,
    api_version: str = "",
) -> Informer[Any]:
    """An informer of every template Workload at ``api_version`` (v1alpha2 by
    default, v1beta1 or v1alpha3), handlers called with the PodGroup's API."""
    api = GangApi.POD_GROUP
    version = api_version or api.value
    return _informer_for(
        api,
        transport,
        clock,
        f"/apis/{version}/{WORKLOAD_TEMPLATES_PLURAL}",
        TEMPLATES_MODEL_AT[version],
        f"{WORKLOAD_TEMPLATES_PLURAL}.{version}",
        on_add=on_add,
        on_update=on_update,
        on_delete=on_delete,
        config=config,
        rng=rng,
    )


def composites_informer(
    transport: Transport,
    clock: Clock,
    *,
    on_add: GroupAdd | None = None,
    on_update: GroupUpdate | None = None,
    on_delete: GroupDelete | None = None,
    config: InformerConfig | None = None,
    rng: random.Random | None = None,
) -> Informer[Any]:
    """An informer of every v1alpha3 CompositePodGroup (KEP-6012), handlers called
    with the PodGroup's API: the v1beta1 PodGroups under them are its objects."""
    return _informer_for(
        GangApi.POD_GROUP,
        transport,
        clock,
        COMPOSITES_PATH,
        CompositePodGroup,
        f"{COMPOSITE_POD_GROUPS_PLURAL}.{COMPOSITE_POD_GROUP_V1ALPHA3}",
        on_add=on_add,
        on_update=on_update,
        on_delete=on_delete,
        config=config,
        rng=rng,
    )
