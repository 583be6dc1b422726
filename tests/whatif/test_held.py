"""Why a target is held back before any attempt, from the objects alone
(``troupe.whatif.held``): the answer ``troupe explain`` gives at once."""

from __future__ import annotations

from typing import Any

from troupe.sim.snapshot_file import Snapshot
from troupe.whatif.held import held_back
from troupe.whatif.state import ClusterState, Target

LABEL = "scheduling.x-k8s.io/pod-group"


def pod(name: str, *, node: str = "", gates: tuple[str, ...] = (), **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "c"}], **spec}
    if node:
        body["nodeName"] = node
    if gates:
        body["schedulingGates"] = [{"name": g} for g in gates]
    return {"metadata": {"name": name, "namespace": "ml"}, "spec": body}


def coscheduling_member(name: str, **kw: Any) -> dict[str, Any]:
    p = pod(name, **kw)
    p["metadata"]["labels"] = {LABEL: "train"}
    return p


def native_member(name: str, **kw: Any) -> dict[str, Any]:
    return pod(name, schedulingGroup={"podGroupName": "train"}, **kw)


COSCHEDULING = {
    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {"minMember": 8},
}
V1BETA1 = {
    "apiVersion": "scheduling.k8s.io/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {"schedulingPolicy": {"gang": {"minCount": 8}}},
}
GANG = Target("podgroup", "ml", "train")


def state(pods: list[dict[str, Any]], **resources: list[dict[str, Any]]) -> ClusterState:
    return ClusterState(Snapshot(resources={"pods": pods, **resources}))


def test_too_few_pods_for_the_quorum_in_the_schedulers_words() -> None:
    s = state(
        [coscheduling_member(f"train-{i}") for i in range(6)],
        coschedulingpodgroups=[COSCHEDULING],
    )
    held = held_back(s, GANG)
    assert held is not None and held.source == "group objects"
    assert held.message == (
        "gang ml/train: waiting for minCount pods from a gang to appear in scheduling queue "
        "(spec.minMember is 8; 6 of its pods are ready to schedule or placed)"
    )
    assert held.hint == "create 2 more of its pods, or lower spec.minMember to 6"
    assert len(held.pods) == 6


def test_bound_members_count_and_gated_ones_do_not() -> None:
    pods = [native_member(f"train-{i}", node="n") for i in range(3)]
    pods += [native_member(f"train-{i}") for i in range(3, 7)]
    pods.append(native_member("train-7", gates=("example.com/kueue",)))
    held = held_back(state(pods, podgroups=[V1BETA1]), GANG)
    assert held is not None
    assert "(spec.schedulingPolicy.gang.minCount is 8; 7 of its pods" in held.message
    assert "1 more wait for their own schedulingGates and do not count (ml/train-7)" in (
        held.message
    )
    assert held.hint.startswith("create 1 more of its pods or lift the scheduling gates")
    # Enough pods, none gated: attempted, nothing to say here.
    pods[-1] = native_member("train-7")
    assert held_back(state(pods, podgroups=[V1BETA1]), GANG) is None


def test_a_missing_group_object() -> None:
    held = held_back(state([native_member("train-0")]), GANG)
    assert held is not None
    assert held.message == (
        'gang ml/train: waiting for pods\'s workload "train" to appear in scheduling queue: '
        "no PodGroup ml/train exists (named by the pods' spec.schedulingGroup.podGroupName)"
    )
    assert held.hint == "create the PodGroup ml/train"


def test_a_malformed_group_names_its_field() -> None:
    bad = {**COSCHEDULING, "spec": {"minMember": 0}}
    held = held_back(state([coscheduling_member("train-0")], coschedulingpodgroups=[bad]), GANG)
    assert held is not None
    assert held.message == (
        "scheduling.x-k8s.io/v1alpha1 ml/train: spec.minMember: must be at least 1, got 0"
    )
    assert held.hint == "fix spec.minMember"


def test_what_the_scheduler_told_every_pending_member() -> None:
    condition = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    told = {"conditions": [{**condition, "message": "gang ml/train: odd"}]}
    pods = [native_member(f"train-{i}") for i in range(8)]
    for p in pods:
        p["status"] = told
    held = held_back(state(pods, podgroups=[V1BETA1]), GANG)
    assert held is not None
    assert (held.message, held.source) == ("gang ml/train: odd", "pod conditions")
    # One member attempted already (another reason): not held.
    pods[0]["status"] = {"conditions": [{**told["conditions"][0], "reason": "Unschedulable"}]}
    assert held_back(state(pods, podgroups=[V1BETA1]), GANG) is None


def test_a_lone_pod_with_scheduling_gates() -> None:
    s = state([pod("web", gates=("a", "b"))])
    held = held_back(s, Target("pod", "ml", "web"))
    assert held is not None and held.message == "waiting for scheduling gates: a, b"
    assert held_back(state([pod("web")]), Target("pod", "ml", "web")) is None
