"""Informers for the gang API objects the cluster serves.

The daemon discovers the served kinds (``served_gang_apis``), builds one
``Informer`` per kind with ``gang_informers`` — or does both with
``add_gang_informers`` on its ``SharedInformers`` before ``start`` — and passes
callbacks that receive the API with each object, so one set of handlers serves all
three kinds (``GangDirectory.upsert`` / ``remove``, and the PodGroup status
controller for the scheduler-plugins kind). Objects are parsed straight into the
``troupe.api.gangapi`` models. Where the v1alpha2 PodGroup is watched, the v1alpha2
Workload is too (when served), delivered as a ``WorkloadTemplates`` with the
PodGroup's API: a PodGroup's ``spec.podGroupTemplateRef`` names its templates.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeAlias

from troupe.api.clock import Clock
from troupe.api.gangapi import (
    MODEL_OF,
    PLURAL_OF,
    WORKLOAD_TEMPLATES_PLURAL,
    GroupObject,
    WorkloadTemplates,
)
from troupe.api.gangs import GangApi
from troupe.kube.discovery import served_gang_apis, serves
from troupe.kube.informer import Informer, InformerConfig
from troupe.kube.shared import SharedInformers
from troupe.kube.transport import Transport

GroupAdd: TypeAlias = Callable[[GangApi, GroupObject], None]
GroupUpdate: TypeAlias = Callable[[GangApi, GroupObject, GroupObject], None]
GroupDelete: TypeAlias = Callable[[GangApi, GroupObject], None]

# All namespaces: list + watch paths of each kind.
GANG_PATHS: Final = {api: f"/apis/{api.value}/{PLURAL_OF[api]}" for api in GangApi}
TEMPLATES_PATH: Final = f"/apis/{GangApi.POD_GROUP.value}/{WORKLOAD_TEMPLATES_PLURAL}"


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
) -> Informer[Any]:
    """An informer of every object of ``api``'s kind, handlers called with ``api``."""
    return _informer_for(
        api,
        transport,
        clock,
        GANG_PATHS[api],
        MODEL_OF[api],
        f"{PLURAL_OF[api]}.{api.value}",
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
    apis: Iterable[GangApi],
    transport: Transport,
    clock: Clock,
    *,
    on_add: GroupAdd | None = None,
    on_update: GroupUpdate | None = None,
    on_delete: GroupDelete | None = None,
    config: InformerConfig | None = None,
    rng: random.Random | None = None,
) -> list[Informer[Any]]:
    """One informer per API in ``apis`` (in ``GangApi`` order)."""
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
) -> set[GangApi]:
    """Discover which of the ``enabled`` APIs the cluster serves and add their
    informers to ``shared`` (before ``shared.start``); the APIs watched."""
    served = await served_gang_apis(shared.transport) & set(enabled)
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
    if GangApi.POD_GROUP in served and await serves(
        shared.transport, GangApi.POD_GROUP.value, WORKLOAD_TEMPLATES_PLURAL, "Workload"
    ):
        shared.add(
            templates_informer(
                shared.transport,
                clock,
                on_add=on_add,
                on_update=on_update,
                on_delete=on_delete,
                config=config,
                rng=rng,
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
) -> Informer[Any]:
    """An informer of every v1alpha2 Workload, handlers called with the PodGroup's API."""
    api = GangApi.POD_GROUP
    return _informer_for(
        api,
        transport,
        clock,
        TEMPLATES_PATH,
        WorkloadTemplates,
        f"{WORKLOAD_TEMPLATES_PLURAL}.{api.value}",
        on_add=on_add,
        on_update=on_update,
        on_delete=on_delete,
        config=config,
        rng=rng,
    )
