"""The explain record's wire format: the typed diagnosis serializes to the JSON
object ``/debug/troupe/explain`` has always served, key for key and in that order
(``troupe.cli`` reads it as a dict)."""

from __future__ import annotations

import json

from troupe.api.diagnosis import (
    GroupDiagnosis,
    GroupObject,
    MemberDiagnosis,
    PodDiagnosis,
    PreemptionDiagnosis,
    Quorum,
)
from troupe.api.framework import Diagnosis
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status

MEMBER_KEYS = [
    "pod",
    "reason",
    "code",
    "message",
    "nodes",
    "rejections",
    "reasons",
    "preFilter",
    "postFilter",
    "requests",
]


def info(name: str) -> PodInfo:
    return PodInfo.of(
        Pod.model_validate(
            {
                "metadata": {"name": name, "namespace": "ns", "uid": name},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            }
        )
    )


def failed_member() -> MemberDiagnosis:
    diagnosis = Diagnosis(num_nodes=3, reason_counts={"Too many pods": 1, "Insufficient cpu": 2})
    diagnosis.plugin_counts["Filter/NodeResourcesFit"] = 2
    diagnosis.plugin_counts["Filter/NodePorts"] = 1
    status = Status(Code.UNSCHEDULABLE, ("Insufficient cpu",), "NodeResourcesFit")
    return MemberDiagnosis.of(info("m-0"), status, diagnosis, "Unschedulable", "0/3 nodes")


def test_a_member_entry_keeps_its_keys_counts_most_first_and_fits_on_only_when_it_fit() -> None:
    wire = failed_member().wire()
    assert list(wire) == MEMBER_KEYS
    assert wire["rejections"] == [
        {"extensionPoint": "Filter", "plugin": "NodeResourcesFit", "nodes": 2},
        {"extensionPoint": "Filter", "plugin": "NodePorts", "nodes": 1},
    ]
    assert list(wire["reasons"].items()) == [("Insufficient cpu", 2), ("Too many pods", 1)]
    assert wire["requests"] == {"cpu": 1000}
    fit = MemberDiagnosis.of(
        info("m-1"), None, None, "CoschedulingNotMeetMinMember", "", fits_on="n1"
    )
    assert list(fit.wire()) == [*MEMBER_KEYS, "fitsOn"] and fit.wire()["code"] == ""


def test_a_group_record_serializes_in_the_served_order() -> None:
    record = GroupDiagnosis(
        name="ns/g",
        key="ns/g",
        group=GroupObject("PodGroup", "scheduling.x-k8s.io/v1alpha1", "ns", "g", ""),
        message="gang ns/g: 1 of 2 required pods fit; ...",
        why="...",
        quorum=Quorum(2, "spec.minMember", 0, 1, 2, "1 of 2 required pods fit"),
        min_resources_shortfall="",
        required="topology.kubernetes.io/zone",
        preferred=("troupe.dev/rack",),
        members=(failed_member(),),
        preemption=PreemptionDiagnosis("preempted", "preemption: ...", ("ns/v",), {"ns/m-0": "n1"}),
        time=12.5,
    ).wire()
    assert list(record) == [
        "kind",
        "name",
        "key",
        "group",
        "message",
        "why",
        "quorum",
        "minResourcesShortfall",
        "topology",
        "members",
        "preemption",
        "time",
    ]
    assert list(record["group"]) == ["kind", "api", "namespace", "name", "sub"]
    assert list(record["quorum"]) == [
        "minCount",
        "minCountField",
        "alreadyPlaced",
        "fit",
        "pending",
        "state",
    ]
    assert record["topology"] == {
        "required": "topology.kubernetes.io/zone",
        "preferred": ["troupe.dev/rack"],
    }
    assert record["preemption"] == {
        "result": "preempted",
        "message": "preemption: ...",
        "victims": ["ns/v"],
        "nominated": {"ns/m-0": "n1"},
    }
    assert json.loads(json.dumps(record)) == record


def test_a_pod_record_serializes_in_the_served_order() -> None:
    record = PodDiagnosis("ns/p", 3.0, "0/3 nodes", failed_member(), "").wire()
    assert list(record) == ["kind", "name", "time", "message", "members", "nominatedNodeName"]
    assert record["kind"] == "pod" and list(record["members"][0]) == MEMBER_KEYS
