"""Loading a cluster's state into an embedded cluster, and the what-if changes made
to it there: the one loader of ``troupe replay`` and ``troupe explain`` (its offline
diagnosis and every fix it checks).

``load_snapshot`` creates every object of a ``Snapshot`` through the store of a fresh
``SimCluster`` (started with no ``NodeSpec``), in ``RESOURCES`` order: namespaces and
PriorityClasses first, then nodes (with their captured status), PodDisruptionBudgets,
the gang objects and the pods. Bound pods keep their ``nodeName``; pods in a terminal
phase hold no resources and are left out. The server-set metadata of a captured object
(uid, resourceVersion, managedFields, ...) is dropped (``clean``): the embedded cluster
sets its own. ``add_nodes`` clones a node template, ``remove_nodes`` deletes the nodes
a label selector matches and re-creates their pods unbound, ``add_objects`` creates
more objects (a new gang, ...). ``to_schedule`` names the pods a troupe profile is to
place.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable
from typing import Any, Final

from troupe.sim.apiserver.machinery.errors import ApiError
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.cluster import SimCluster
from troupe.sim.outcome import key
from troupe.sim.snapshot_file import NEVER_CAPTURED, RESOURCES, Snapshot
from troupe.sim.usage import TERMINAL_PHASES
from troupe.whatif.errors import LoadError

Obj = dict[str, Any]
# Server-set metadata a create would refuse or overwrite.
SERVER_META: Final = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)
# Kinds the embedded cluster makes itself (default, kube-system, system-node-critical,
# ...): a captured one that is already there is no error.
_PREMADE: Final = ("namespaces", "priorityclasses")


def clean(obj: Obj) -> Obj:
    """A copy of ``obj`` without the metadata the API server sets."""
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {})
    for name in SERVER_META:
        meta.pop(name, None)
    return obj


def _type_of(cluster: SimCluster, obj: Obj, plural: str | None = None) -> ResourceType:
    """The served type of ``obj`` by its apiVersion and kind (or ``plural``)."""
    api_version = str(obj.get("apiVersion", ""))
    group, _, version = api_version.rpartition("/")
    kind = obj.get("kind")
    for rt in cluster.store.registry:
        if (
            rt.group == group
            and rt.version == version
            and (rt.plural == plural if plural else rt.kind == kind)
        ):
            return rt
    raise LoadError(f"{kind or plural} {key(obj)}: the cluster does not serve {api_version}")


def create(cluster: SimCluster, obj: Obj, plural: str | None = None, *, exist_ok: bool) -> None:
    if obj.get("kind") in NEVER_CAPTURED:
        raise LoadError(f"{obj['kind']} {key(obj)}: not replayed")
    rt = _type_of(cluster, obj, plural)
    try:
        cluster.store.create(rt, clean(obj))
    except ApiError as exc:
        if exc.code == 409 and exist_ok:
            return
        raise LoadError(f"{rt.kind} {key(obj)}: {exc}") from exc


def load_snapshot(cluster: SimCluster, snapshot: Snapshot) -> None:
    """Create the snapshot's objects in ``cluster`` (started, no nodes of its own)."""
    for resource, plural in RESOURCES.items():
        for obj in snapshot.objects(resource):
            if resource == "pods" and obj.get("status", {}).get("phase") in TERMINAL_PHASES:
                continue
            create(cluster, obj, plural.split(".", 1)[0], exist_ok=resource in _PREMADE)


def add_nodes(cluster: SimCluster, template: Obj, count: int) -> list[str]:
    """``count`` copies of ``template`` named ``<template name>-replay-<i>``."""
    base = template.get("metadata", {}).get("name") or "node"
    names = []
    for i in range(count):
        node = clean(template)
        node["metadata"]["name"] = name = f"{base}-replay-{i}"
        labels = node["metadata"].setdefault("labels", {})
        if "kubernetes.io/hostname" in labels:
            labels["kubernetes.io/hostname"] = name
        node.setdefault("apiVersion", "v1")
        node.setdefault("kind", "Node")
        create(cluster, node, exist_ok=False)
        names.append(name)
    return names


def remove_nodes(cluster: SimCluster, selector: str) -> tuple[list[str], list[str]]:
    """Delete the nodes ``selector`` matches; their pods are re-created unbound (they
    are pending again, as if their controller had replaced them). (nodes, pods)."""
    store = cluster.store
    nodes = [n["metadata"]["name"] for n in store.list("nodes", label_selector=selector)]
    moved: list[str] = []
    for name in nodes:
        pods = store.list("pods", field_selector=f"spec.nodeName={name}")
        cluster.remove_node(name)
        for pod in pods:
            pod = clean(pod)
            pod["spec"].pop("nodeName", None)
            pod.pop("status", None)
            store.create("pods", pod)
            moved.append(key(pod))
    return nodes, moved


def add_objects(cluster: SimCluster, docs: Iterable[Obj]) -> list[str]:
    """Create ``docs`` (namespaces first); their ``kind/name``s."""
    docs = sorted(docs, key=lambda d: d.get("kind") != "Namespace")
    made = []
    for doc in docs:
        create(cluster, doc, exist_ok=False)
        made.append(f"{doc.get('kind')}/{key(doc)}")
    return made


def to_schedule(cluster: SimCluster, scheduler_names: Collection[str]) -> list[str]:
    """The pods of a troupe profile with no node yet: what a replay schedules."""
    return sorted(
        key(p)
        for p in cluster.store.list("pods", copy=False)
        if not p["spec"].get("nodeName") and p["spec"].get("schedulerName") in scheduler_names
    )
