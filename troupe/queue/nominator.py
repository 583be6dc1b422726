"""Nominated pods: pods that preemption promised a node to (upstream ``nominator.go``).

After PostFilter (preemption) picks a node for a pod, the scheduler records the
nomination here and writes ``status.nominatedNodeName``; until the pod binds,
Filter on that node accounts for the nominated pods of higher or equal priority
(``troupe.scheduler.framework.nominated``) so the freed room is not taken by someone else.
``SchedulingQueue`` owns one ``Nominator`` and keeps it in step with pod adds,
updates and deletes: a nomination ends when the pod is deleted, bound (anywhere),
placed by a scheduling cycle, or when preemption finds nothing for it or a
higher-priority pod preempts on its node.
"""

from __future__ import annotations

from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo


class Nominator:
    def __init__(self) -> None:
        self._node_of: dict[str, str] = {}
        # node -> pod key -> latest PodInfo, in nomination order
        self._pods_on: dict[str, dict[str, PodInfo]] = {}

    def __len__(self) -> int:
        return len(self._node_of)

    def add(self, info: PodInfo, node_name: str) -> None:
        """Nominate ``info`` to ``node_name``, replacing any earlier nomination.

        An empty ``node_name`` only removes the earlier nomination. A pod already
        bound to a node is never nominated.
        """
        self.delete(info.key)
        if not node_name or info.pod.spec.node_name:
            return
        self._node_of[info.key] = node_name
        self._pods_on.setdefault(node_name, {})[info.key] = info

    def delete(self, key: str) -> None:
        node = self._node_of.pop(key, None)
        if node is None:
            return
        pods = self._pods_on[node]
        del pods[key]
        if not pods:
            del self._pods_on[node]

    def update(self, old: Pod, new: PodInfo) -> None:
        """Follow an informer update of a nominated (or newly nominated) pod.

        Upstream ``UpdateNominatedPod``: when neither version carries
        ``status.nominatedNodeName`` the nomination made by this scheduler is kept
        (the status write may not have landed yet); otherwise the new status wins.
        The stored PodInfo is replaced so Filter sees the latest pod.
        """
        node = new.pod.status.nominated_node_name
        if not old.status.nominated_node_name and not node:
            node = self._node_of.get(new.key, "")
        self.add(new, node)

    def node_of(self, key: str) -> str | None:
        return self._node_of.get(key)

    def pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list(self._pods_on.get(node_name, {}).values())

    def nodes(self) -> list[str]:
        """Nodes with at least one nominated pod (Filter adjusts only these)."""
        return list(self._pods_on)
