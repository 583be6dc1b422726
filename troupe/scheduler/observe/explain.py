"""The last failed attempt of every pending pod and group, for ``troupe explain``.

The failure paths record a structured diagnosis here next to the message they write
to the pod's condition and events: ``FailureReporter.report`` for a pod scheduled on
its own, the group cycle's submit step (``troupe.scheduler.gangs.submit``) for a gang
(every member's diagnosis, the quorum, the minResources shortfall and what preemption
did). Both are typed values (``troupe.api.diagnosis``), kept here as the JSON
objects ``/debug/troupe/explain`` serves (``troupe.kube.health``).

Memory is bounded by what is pending: an entry is dropped when its pod is bound or
deleted, or its group admitted or deleted, and the store never holds more than
``limit`` entries of each kind (the oldest go first).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from troupe.api.diagnosis import GroupDiagnosis, MemberDiagnosis, PodDiagnosis
from troupe.api.framework import Diagnosis
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status

Record = dict[str, Any]

DEFAULT_LIMIT = 20000


class Explanations:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._pods: OrderedDict[str, Record] = OrderedDict()
        self._groups: OrderedDict[str, Record] = OrderedDict()

    def __len__(self) -> int:
        return len(self._pods) + len(self._groups)

    @staticmethod
    def _put(table: OrderedDict[str, Record], key: str, record: Record, limit: int) -> None:
        table.pop(key, None)
        table[key] = record
        while len(table) > limit:
            table.popitem(last=False)

    def pod_failed(
        self,
        info: PodInfo,
        status: Status,
        diagnosis: Diagnosis | None,
        message: str,
        nominated_node_name: str | None = None,
    ) -> None:
        reason = "SchedulerError" if status.code is Code.ERROR else "Unschedulable"
        record = PodDiagnosis(
            info.key,
            time.time(),
            message,
            MemberDiagnosis.of(info, status, diagnosis, reason, message),
            nominated_node_name or "",
        )
        self._put(self._pods, info.key, record.wire(), self.limit)

    def group_failed(self, diagnosis: GroupDiagnosis) -> None:
        """A group's attempt failed; its members' pod entries point to it."""
        key = diagnosis.key
        self._put(self._groups, key, diagnosis.wire(), self.limit)
        for member in diagnosis.members:
            self._put(self._pods, member.pod, {"group": key}, self.limit)

    def pod_gone(self, key: str) -> None:
        """The pod was bound or deleted."""
        self._pods.pop(key, None)

    def group_gone(self, key: str) -> None:
        """The group was admitted (its quorum went to binding) or deleted."""
        record = self._groups.pop(key, None)
        if record is not None:
            for member in record.get("members", ()):
                entry = self._pods.get(member["pod"])
                if entry is not None and entry.get("group") == key:
                    del self._pods[member["pod"]]

    def object_gone(self, namespace: str, name: str) -> None:
        """A group object was deleted: forget every group it held."""
        gone = [
            key
            for key, record in self._groups.items()
            if record["group"]["namespace"] == namespace and record["group"]["name"] == name
        ]
        for key in gone:
            self.group_gone(key)

    def pod(self, key: str) -> Record | None:
        """A pod's last diagnosis: its own, or its group's (with ``"member"`` set)."""
        record = self._pods.get(key)
        if record is None:
            return None
        group = record.get("group")
        if group is not None:
            found = self._groups.get(group)
            return {**found, "member": key} if found is not None else None
        return record

    def group(self, namespace: str, name: str, sub: str = "") -> Record | None:
        """The last diagnosis of the group whose object is ``namespace/name`` (any API;
        ``sub``: a Workload's ``podGroup[/replica]``)."""
        best: Record | None = None
        for record in self._groups.values():
            g = record.get("group", {})
            if g.get("namespace") != namespace or g.get("name") != name:
                continue
            if sub and sub != g.get("sub", ""):
                continue
            if best is None or record["time"] >= best["time"]:
                best = record
        return best
