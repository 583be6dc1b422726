"""The diagnosis of a failed attempt, as ``troupe explain`` reads it.

The scheduler records the last failed attempt of every pending pod and group
(``troupe.scheduler.observe.explain.Explanations``) and serves it at
``/debug/troupe/explain`` (``troupe.kube.health``, docs/explain.md). These frozen
values are that record, typed; ``wire()`` gives the JSON object served, whose keys
and their order are the wire format ``troupe.cli`` reads (tests in
tests/integration/test_explain*_e2e.py hold it).

A pod scheduled on its own gets a ``PodDiagnosis`` (``FailureReporter``); a group a
``GroupDiagnosis``, built from the group attempt's result by the submit step
(``troupe.scheduler.gangs.diagnosis``), every member with its own
``MemberDiagnosis``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from troupe.api.framework import Diagnosis
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status

Wire = dict[str, Any]


@dataclass(frozen=True, slots=True)
class PluginRejection:
    """One plugin at one extension point rejected the pod on ``nodes`` nodes."""

    extension_point: str
    plugin: str
    nodes: int

    def wire(self) -> Wire:
        return {"extensionPoint": self.extension_point, "plugin": self.plugin, "nodes": self.nodes}


@dataclass(frozen=True, slots=True)
class MemberDiagnosis:
    """One member's (or a lone pod's) part of a diagnosis: which extension point and
    plugin rejected it on how many nodes, and the FitError reasons."""

    pod: str
    reason: str
    code: str
    message: str
    nodes: int
    rejections: tuple[PluginRejection, ...]
    # FitError reasons by how many nodes gave them, most first.
    reasons: Mapping[str, int]
    pre_filter: str
    post_filter: str
    requests: Mapping[str, int]
    # A member of a gang that fit (and was taken back with the gang): where.
    fits_on: str | None = None

    @classmethod
    def of(
        cls,
        info: PodInfo,
        status: Status | None,
        diagnosis: Diagnosis | None,
        reason: str,
        message: str,
        *,
        fits_on: str | None = None,
    ) -> MemberDiagnosis:
        rejections: list[PluginRejection] = []
        if diagnosis is not None:
            for point_plugin, n in sorted(diagnosis.plugin_counts.items(), key=lambda i: -i[1]):
                point, _, plugin = point_plugin.partition("/")
                rejections.append(PluginRejection(point, plugin, n))
        if status is not None and status.plugin and not rejections and not status.is_success:
            rejections.append(PluginRejection(status.point or "Filter", status.plugin, 0))
        reasons = diagnosis.reason_counts if diagnosis is not None else {}
        return cls(
            pod=info.key,
            reason=reason,
            code=status.code.name if status is not None else "",
            message=message,
            nodes=diagnosis.num_nodes if diagnosis is not None else 0,
            rejections=tuple(rejections),
            reasons=dict(sorted(reasons.items(), key=lambda i: -i[1])),
            pre_filter=diagnosis.pre_filter_message if diagnosis is not None else "",
            post_filter=diagnosis.post_filter_message if diagnosis is not None else "",
            requests=dict(info.requests),
            fits_on=fits_on,
        )

    def wire(self) -> Wire:
        out: Wire = {
            "pod": self.pod,
            "reason": self.reason,
            "code": self.code,
            "message": self.message,
            "nodes": self.nodes,
            "rejections": [r.wire() for r in self.rejections],
            "reasons": dict(self.reasons),
            "preFilter": self.pre_filter,
            "postFilter": self.post_filter,
            "requests": dict(self.requests),
        }
        if self.fits_on is not None:
            out["fitsOn"] = self.fits_on
        return out


@dataclass(frozen=True, slots=True)
class PodDiagnosis:
    """The last failed attempt of a pod scheduled on its own."""

    name: str
    time: float
    message: str
    member: MemberDiagnosis
    nominated_node_name: str = ""

    def wire(self) -> Wire:
        return {
            "kind": "pod",
            "name": self.name,
            "time": self.time,
            "message": self.message,
            "members": [self.member.wire()],
            "nominatedNodeName": self.nominated_node_name,
        }


@dataclass(frozen=True, slots=True)
class GroupObject:
    """The group's API object; ``sub``: a Workload's ``podGroup[/replica]``."""

    kind: str
    api: str
    namespace: str
    name: str
    sub: str

    def wire(self) -> Wire:
        return {
            "kind": self.kind,
            "api": self.api,
            "namespace": self.namespace,
            "name": self.name,
            "sub": self.sub,
        }


@dataclass(frozen=True, slots=True)
class Quorum:
    """How far the attempt got toward ``minCount``."""

    min_count: int
    min_count_field: str
    already_placed: int
    fit: int
    pending: int
    state: str

    def wire(self) -> Wire:
        return {
            "minCount": self.min_count,
            "minCountField": self.min_count_field,
            "alreadyPlaced": self.already_placed,
            "fit": self.fit,
            "pending": self.pending,
            "state": self.state,
        }


@dataclass(frozen=True, slots=True)
class PreemptionDiagnosis:
    """What gang preemption did for the attempt (KEP-5710)."""

    result: str
    message: str
    victims: tuple[str, ...]
    nominated: Mapping[str, str]

    def wire(self) -> Wire:
        return {
            "result": self.result,
            "message": self.message,
            "victims": list(self.victims),
            "nominated": dict(self.nominated),
        }


@dataclass(frozen=True, slots=True)
class GroupDiagnosis:
    """The last failed attempt of a pod group: the quorum, the minResources
    shortfall, the topology asked for, every member, and what preemption did."""

    name: str
    key: str
    group: GroupObject
    message: str
    why: str
    quorum: Quorum
    min_resources_shortfall: str
    required: str
    preferred: tuple[str, ...]
    members: tuple[MemberDiagnosis, ...]
    preemption: PreemptionDiagnosis | None
    time: float

    def wire(self) -> Wire:
        return {
            "kind": "podgroup",
            "name": self.name,
            "key": self.key,
            "group": self.group.wire(),
            "message": self.message,
            "why": self.why,
            "quorum": self.quorum.wire(),
            "minResourcesShortfall": self.min_resources_shortfall,
            "topology": {"required": self.required, "preferred": list(self.preferred)},
            "members": [m.wire() for m in self.members],
            "preemption": self.preemption.wire() if self.preemption is not None else None,
            "time": self.time,
        }
