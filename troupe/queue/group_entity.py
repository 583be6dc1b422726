"""Changes to a group entity's data: members in and out, QueueSort fields, pods again.

``QueuedGroupInfo`` is plain data; these functions are the only code that edits
its members. ``GroupQueue`` calls them for its own entities, ``GroupTable`` when a
failed attempt is handed back (``trim_members``) or a group turns Basic
(``as_pods``). A leaf: it imports only ``entity``.
"""

from __future__ import annotations

from collections.abc import Callable

from troupe.api.gangs import GangPolicy, GroupRef
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.queue.entity import QueuedGroupInfo, QueuedPodInfo


def add_member(entity: QueuedGroupInfo, info: PodInfo, joined: float) -> None:
    """Add or replace a member; a replaced member keeps its original join time."""
    entity.members[info.key] = info
    entity.joined.setdefault(info.key, joined)


def remove_member(entity: QueuedGroupInfo, key: str) -> None:
    entity.joined.pop(key, None)
    entity.members.pop(key, None)


def trim_members(
    entity: QueuedGroupInfo,
    keep: set[str],
    left_out: set[str],
    updates: dict[str, PodInfo],
    group_of: Callable[[Pod], GroupRef | None],
) -> tuple[list[PodInfo], list[str]]:
    """Keep only the members of ``entity`` in ``keep`` and not in ``left_out``, at
    their newest versions (``updates``). Returns the members whose group changed
    (to be added anew) and every member that left."""
    members, joined = entity.members, entity.joined
    entity.members, entity.joined = {}, {}
    strays: list[PodInfo] = []
    for pod_key, info in members.items():
        if pod_key not in keep or pod_key in left_out:
            continue
        info = updates.get(pod_key, info)
        if group_of(info.pod) != entity.ref:
            strays.append(info)
            continue
        add_member(entity, info, joined.get(pod_key, entity.timestamp))
    return strays, [pod_key for pod_key in members if pod_key not in entity.members]


def as_pods(entity: QueuedGroupInfo) -> list[QueuedPodInfo]:
    """The members of ``entity`` as pod entities that keep its attempt history (the
    group turned Basic: its members are scheduled one by one)."""
    pods: list[QueuedPodInfo] = []
    for pod_key, info in entity.members.items():
        pod = QueuedPodInfo.of(info, entity.joined.get(pod_key, entity.timestamp))
        pod.attempts = entity.attempts
        pod.backoff_expiry = entity.backoff_expiry
        pod.initial_attempt_timestamp = entity.initial_attempt_timestamp
        pod.unschedulable_plugins = set(entity.unschedulable_plugins)
        pod.pending_plugins = set(entity.pending_plugins)
        pods.append(pod)
    return pods


def resort(entity: QueuedGroupInfo, policy: GangPolicy | None, created: float | None) -> None:
    """Recompute the QueueSort fields from ``policy`` and the members; ``created``:
    the group's creation time on the queue clock, None while unknown.

    KEP-4671 "Queuing and Ordering": the group's own priority when the API sets
    one, else the lowest member priority (the weakest link decides whether the
    group fits). KEP-3370 QueueSort: the group's creation time when known, else
    the earliest member's arrival in the queue.
    """
    entity.policy = policy
    entity.created = created
    if policy is not None and policy.priority is not None:
        entity.priority = policy.priority
    elif entity.members:
        entity.priority = min(info.priority for info in entity.members.values())
    if created is not None:
        entity.timestamp = created
    elif entity.joined:
        entity.timestamp = min(entity.joined.values())
