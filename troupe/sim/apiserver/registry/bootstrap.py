"""``new_store``: the store of a new cluster, as ``ApiServer`` starts it.

It registers the built-in kinds of ``kinds.py`` (leaving out the ``scheduling.k8s.io``
versions of Workload, PodGroup and CompositePodGroup ``workload_versions`` does not
name: a 1.35 or 1.36 cluster serves no v1beta1 and no v1alpha3), installs each kind's
strategy (``GenericStrategy`` for the rest, custom resources included) and the
disruption controller, and creates what a new cluster holds: the system namespaces,
the system PriorityClasses and the bootstrap RBAC roles (``rbac.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from troupe.api.clock import Clock
from troupe.sim.apiserver.controllers.disruption import DisruptionController
from troupe.sim.apiserver.machinery.content import name_is_dns_subdomain
from troupe.sim.apiserver.machinery.resources import Registry
from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.registry.kinds import BUILTIN_KINDS, Served
from troupe.sim.apiserver.registry.namespaces import SYSTEM_NAMESPACES
from troupe.sim.apiserver.registry.pods import SYSTEM_PRIORITY_CLASSES
from troupe.sim.apiserver.registry.rbac import create_bootstrap_policy
from troupe.sim.apiserver.storage.store import Store

# The versions of the native Workload, PodGroup and CompositePodGroup a Kubernetes 1.37
# cluster serves (v1alpha3: the CompositePodGroup only).
WORKLOAD_VERSIONS: Final = ("v1alpha1", "v1alpha2", "v1beta1", "v1alpha3")
_NATIVE_KINDS: Final = ("Workload", "PodGroup", "CompositePodGroup")


def new_store(
    *,
    history: int = 10000,
    clock: Clock | None = None,
    workload_versions: Iterable[str] = WORKLOAD_VERSIONS,
    kinds: Sequence[Served] = BUILTIN_KINDS,
) -> Store:
    """A store with every strategy installed and the bootstrap objects created.
    ``kinds``: the served built-in kinds (tests add one to check that an entry is all
    a new kind needs)."""
    wanted = set(workload_versions)
    registry = Registry(
        served.resource
        for served in kinds
        if not (
            served.resource.group == "scheduling.k8s.io"
            and served.resource.kind in _NATIVE_KINDS
            and served.resource.version not in wanted
        )
    )
    store = Store(registry, history=history, clock=clock, default_strategy=GenericStrategy())
    # One strategy per storage key, from the first entry of the key, whichever versions
    # are served (a 1.36 cluster serves the v1alpha2 Workload over the v1beta1 key).
    installed: set[str] = set()
    for served in kinds:
        key = served.resource.key
        if key in installed:
            if served.strategy is not None or served.names is not None:
                raise ValueError(f"two strategies declared for the storage of {key}")
            continue
        installed.add(key)
        strategy = served.strategy or GenericStrategy
        store.set_strategy(key, strategy(served.names or name_is_dns_subdomain))
    DisruptionController(store)
    for namespace in SYSTEM_NAMESPACES:
        store.create("namespaces", {"metadata": {"name": namespace}}, copy=False)
    for name, value, description in SYSTEM_PRIORITY_CLASSES:
        pc: dict[str, Any] = {
            "metadata": {"name": name},
            "value": value,
            "description": description,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        store.create("priorityclasses.scheduling.k8s.io", pc, copy=False)
    create_bootstrap_policy(store)
    return store
