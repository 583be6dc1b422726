"""Upstream's ``ValidatePodCreate`` for the pod fields the scheduler reads.

On create, every container and init container needs a name that is a DNS label
(``spec.containers[0].name: Invalid value: "C": a lowercase RFC 1123 label ...``),
unique among all of them (``spec.initContainers[0].name: Duplicate value: "c"``: a
regular container is checked against those before it, an init container against every
regular container and the init containers before it, as upstream), and an image;
``spec.nodeName``, when set, is a DNS subdomain. The rest of the spec is not checked
beyond its types (``schemas.POD``) and quantities (``quantities.py``); an update can
change only what ``pod_update.py`` allows. Called by ``pods.PodStrategy``.
"""

from __future__ import annotations

from typing import Any

from troupe.sim.apiserver.machinery.content import is_dns1123_label, is_dns1123_subdomain
from troupe.sim.apiserver.machinery.field import Cause, duplicate, invalid, required


def pod_create_causes(spec: Any) -> list[Cause]:
    if not isinstance(spec, dict):
        return []
    causes: list[Cause] = []
    regular = [c for c in spec.get("containers") or () if isinstance(c, dict)]
    names: set[str] = set()
    for i, container in enumerate(regular):
        path = f"spec.containers[{i}]"
        causes += _container_causes(container, path)
        name = container.get("name") or ""
        if name in names:
            causes.append(duplicate(f"{path}.name", name))
        names.add(name)
    init_names: set[str] = set()
    for i, container in enumerate(
        c for c in spec.get("initContainers") or () if isinstance(c, dict)
    ):
        path = f"spec.initContainers[{i}]"
        causes += _container_causes(container, path)
        name = container.get("name") or ""
        if name in init_names or name in names:
            causes.append(duplicate(f"{path}.name", name))
        elif name:
            init_names.add(name)
    node = spec.get("nodeName")
    if node:
        causes += [invalid("spec.nodeName", node, m) for m in is_dns1123_subdomain(node)]
    return causes


def _container_causes(container: dict[str, Any], path: str) -> list[Cause]:
    causes: list[Cause] = []
    name = container.get("name") or ""
    if not name:
        causes.append(required(f"{path}.name"))
    else:
        causes += [invalid(f"{path}.name", name, m) for m in is_dns1123_label(name)]
    if not container.get("image"):
        causes.append(required(f"{path}.image"))
    return causes
