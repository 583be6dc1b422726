"""The store behind ``/debug/troupe/explain``: last diagnosis only, bounded, dropped
when the pod or group is no longer pending."""

from __future__ import annotations

from troupe.api.diagnosis import GroupDiagnosis, GroupObject, MemberDiagnosis, Quorum
from troupe.api.framework import Diagnosis
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.scheduler.observe.explain import Explanations


def info(name: str) -> PodInfo:
    return PodInfo.of(
        Pod.model_validate({"metadata": {"name": name, "namespace": "ns", "uid": name}})
    )


def test_a_pod_keeps_its_last_diagnosis_until_bound_and_the_store_is_bounded() -> None:
    store = Explanations(limit=2)
    diagnosis = Diagnosis(num_nodes=3, reason_counts={"Insufficient cpu": 3})
    diagnosis.plugin_counts["Filter/NodeResourcesFit"] = 3
    status = Status(Code.UNSCHEDULABLE)
    store.pod_failed(info("a"), status, diagnosis, "first")
    store.pod_failed(info("a"), status, diagnosis, "second")
    record = store.pod("ns/a")
    assert record is not None and record["message"] == "second"
    assert record["members"][0]["rejections"] == [
        {"extensionPoint": "Filter", "plugin": "NodeResourcesFit", "nodes": 3}
    ]
    store.pod_failed(info("b"), status, None, "b")
    store.pod_failed(info("c"), status, None, "c")
    assert store.pod("ns/a") is None and len(store) == 2
    store.pod_gone("ns/b")
    assert store.pod("ns/b") is None


def test_a_group_answers_for_its_members_and_goes_with_its_object() -> None:
    store = Explanations()
    members = tuple(
        MemberDiagnosis.of(info(f"m-{i}"), None, None, "CoschedulingNotMeetMinMember", "")
        for i in range(2)
    )
    diagnosis = GroupDiagnosis(
        name="ns/g",
        key="ns/g",
        group=GroupObject("PodGroup", "scheduling.x-k8s.io/v1alpha1", "ns", "g", ""),
        message="gang ns/g: 2 of 3 required pods fit; not enough members",
        why="not enough members",
        quorum=Quorum(3, "spec.minMember", 0, 2, 2, "2 of 3 required pods fit"),
        min_resources_shortfall="",
        required="",
        preferred=(),
        members=members,
        preemption=None,
        time=1.0,
    )
    store.group_failed(diagnosis)
    assert store.group("ns", "g") == diagnosis.wire()
    member = store.pod("ns/m-1")
    assert member is not None and member["member"] == "ns/m-1"
    store.object_gone("ns", "g")
    assert store.group("ns", "g") is None and store.pod("ns/m-0") is None and len(store) == 0
