"""The Namespace informer: every namespace's labels into a ``NamespaceLabels``.

The daemon adds it to its ``SharedInformers`` before ``start``. The store it fills
is the one the scheduler's frameworks serve as ``Handle.namespaces``: InterPodAffinity
matches a term's ``namespaceSelector`` against it (upstream's plugin reads a
Namespace lister the same way). A namespace added, deleted or relabelled is also
passed to ``handlers`` (``ClusterEventHandlers``), which turn it into a cluster event
so pods rejected by a namespace selector are retried; an update that leaves the
labels as they were changes nothing and is not passed on.
"""

from __future__ import annotations

import random
from typing import Final, Protocol

from troupe.api.clock import Clock
from troupe.api.framework import NamespaceLabels
from troupe.api.objects import Namespace
from troupe.kube.informer import Informer, InformerConfig
from troupe.kube.transport import Transport

NAMESPACES_PATH: Final = "/api/v1/namespaces"


class NamespaceHandlers(Protocol):
    """Who hears about namespace changes once the store has them."""

    def on_namespace_add(self, namespace: Namespace) -> None: ...
    def on_namespace_update(self, old: Namespace, new: Namespace) -> None: ...
    def on_namespace_delete(self, namespace: Namespace) -> None: ...


def namespace_informer(
    transport: Transport,
    clock: Clock,
    store: NamespaceLabels,
    handlers: NamespaceHandlers | None = None,
    *,
    config: InformerConfig | None = None,
    rng: random.Random | None = None,
) -> Informer[Namespace]:
    """An informer keeping ``store`` in step with the cluster's namespaces."""

    def added(namespace: Namespace) -> None:
        store.put(namespace)
        if handlers is not None:
            handlers.on_namespace_add(namespace)

    def updated(old: Namespace, new: Namespace) -> None:
        if store.put(new) and handlers is not None:
            handlers.on_namespace_update(old, new)

    def deleted(namespace: Namespace) -> None:
        store.remove(namespace.name)
        if handlers is not None:
            handlers.on_namespace_delete(namespace)

    return Informer(
        transport,
        NAMESPACES_PATH,
        Namespace,
        clock,
        on_add=added,
        on_update=updated,
        on_delete=deleted,
        config=config,
        rng=rng,
        name="namespaces",
    )
