"""The three gang APIs' objects become a GangPolicy, or a GroupProblem naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.gangapi import (
    CoschedulingPodGroup,
    PodGroup,
    Workload,
    parse_time,
)
from troupe.api.gangapi_kinds import (
    MODEL_OF,
    GroupObject,
    api_of,
)
from troupe.api.gangapi_policy import policy_of, ref_of_object
from troupe.api.gangs import GangApi, GangPolicy, GroupProblem, GroupRef

NS = "team-a"
CREATED = "2026-01-01T00:00:00Z"
CREATED_EPOCH = 1767225600.0
GI = 2**30


def cosched(spec: dict[str, Any], name: str = "pg") -> CoschedulingPodGroup:
    return CoschedulingPodGroup.model_validate(
        {"metadata": {"name": name, "namespace": NS, "creationTimestamp": CREATED}, "spec": spec}
    )


def workload(*pod_groups: dict[str, Any], name: str = "w") -> Workload:
    return Workload.model_validate(
        {
            "metadata": {"name": name, "namespace": NS, "creationTimestamp": CREATED},
            "spec": {"podGroups": list(pod_groups)},
        }
    )


def gang(name: str, min_count: int) -> dict[str, Any]:
    return {"name": name, "policy": {"gang": {"minCount": min_count}}}


def basic(name: str) -> dict[str, Any]:
    return {"name": name, "policy": {"basic": {}}}


def pod_group(spec: dict[str, Any], name: str = "pg") -> PodGroup:
    return PodGroup.model_validate(
        {"metadata": {"name": name, "namespace": NS, "creationTimestamp": CREATED}, "spec": spec}
    )


def cosched_ref(name: str = "pg") -> GroupRef:
    return GroupRef(GangApi.COSCHEDULING, NS, name)


def workload_ref(pod_group_name: str, replica: str = "", name: str = "w") -> GroupRef:
    return GroupRef(GangApi.WORKLOAD, NS, name, pod_group_name, replica)


def pod_group_ref(name: str = "pg") -> GroupRef:
    return GroupRef(GangApi.POD_GROUP, NS, name)


CLASSES = {"high": 1000, "low": -5}


def lookup(name: str) -> int | None:
    return CLASSES.get(name)


def gang_policy(min_count: int, **extra: Any) -> GangPolicy:
    return GangPolicy(gang=True, min_count=min_count, created=CREATED_EPOCH, **extra)


def basic_policy(**extra: Any) -> GangPolicy:
    return GangPolicy(gang=False, min_count=1, created=CREATED_EPOCH, **extra)


POLICIES = [
    pytest.param(
        cosched({"minMember": 3}),
        cosched_ref(),
        gang_policy(3),
        id="PodGroup minMember 3 is a gang of 3",
    ),
    pytest.param(
        cosched({"minMember": 2, "minResources": {"cpu": "1500m", "memory": "1Gi", "x/gpu": 2}}),
        cosched_ref(),
        gang_policy(2, min_resources={"cpu": 1500, "memory": GI, "x/gpu": 2}),
        id="PodGroup minResources become millicores, bytes and counts",
    ),
    pytest.param(
        cosched({"minMember": 1, "scheduleTimeoutSeconds": 30}),
        cosched_ref(),
        gang_policy(1, timeout_seconds=30.0),
        id="PodGroup scheduleTimeoutSeconds is the group timeout",
    ),
    pytest.param(
        cosched({"minMember": 1, "scheduleTimeoutSeconds": 0}),
        cosched_ref(),
        gang_policy(1),
        id="PodGroup scheduleTimeoutSeconds 0 means the profile default",
    ),
    pytest.param(
        workload(basic("driver"), gang("workers", 4)),
        workload_ref("workers"),
        gang_policy(4),
        id="Workload gang pod group is a gang of minCount",
    ),
    pytest.param(
        workload(basic("driver"), gang("workers", 4)),
        workload_ref("driver"),
        basic_policy(),
        id="Workload basic pod group is scheduled pod by pod",
    ),
    pytest.param(
        workload(gang("workers", 4)),
        workload_ref("workers", replica="r7"),
        gang_policy(4),
        id="every Workload replica key gets the pod group's policy",
    ),
    pytest.param(
        pod_group({"schedulingPolicy": {"gang": {"minCount": 2}}}),
        pod_group_ref(),
        gang_policy(2),
        id="v1alpha2 PodGroup gang is a gang of minCount without a priority",
    ),
    pytest.param(
        pod_group({"schedulingPolicy": {"basic": {}}, "disruptionMode": "PodGroup"}),
        pod_group_ref(),
        basic_policy(),
        id="v1alpha2 PodGroup basic is scheduled pod by pod",
    ),
    pytest.param(
        pod_group(
            {
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "priority": 7,
                "priorityClassName": "high",
            }
        ),
        pod_group_ref(),
        gang_policy(2, priority=7),
        id="v1alpha2 PodGroup spec.priority wins over its class",
    ),
    pytest.param(
        pod_group({"schedulingPolicy": {"gang": {"minCount": 2}}, "priorityClassName": "high"}),
        pod_group_ref(),
        gang_policy(2, priority=1000),
        id="v1alpha2 PodGroup without spec.priority takes its class's value",
    ),
    pytest.param(
        pod_group({"schedulingPolicy": {"gang": {"minCount": 2}}, "priorityClassName": "gone"}),
        pod_group_ref(),
        gang_policy(2),
        id="v1alpha2 PodGroup naming an unknown class has no group priority",
    ),
]


@pytest.mark.parametrize(("obj", "ref", "expected"), POLICIES)
def test_policy(obj: GroupObject, ref: GroupRef, expected: GangPolicy) -> None:
    assert policy_of(obj, ref, lookup) == expected


PROBLEMS = [
    pytest.param(
        cosched({"minMember": 0}),
        cosched_ref(),
        "spec.minMember",
        "must be at least 1, got 0",
        id="PodGroup minMember 0 is a problem",
    ),
    pytest.param(
        cosched({"minMember": -3}),
        cosched_ref(),
        "spec.minMember",
        "must be at least 1, got -3",
        id="PodGroup negative minMember is a problem",
    ),
    pytest.param(
        cosched({}),
        cosched_ref(),
        "spec.minMember",
        "must be at least 1, got 0",
        id="PodGroup without minMember is a problem",
    ),
    pytest.param(
        cosched({"minMember": 2, "scheduleTimeoutSeconds": -1}),
        cosched_ref(),
        "spec.scheduleTimeoutSeconds",
        "must not be negative, got -1",
        id="PodGroup negative timeout is a problem",
    ),
    pytest.param(
        cosched({"minMember": 2, "minResources": {"memory": "1Gi", "cpu": "lots"}}),
        cosched_ref(),
        "spec.minResources[cpu]",
        "invalid quantity 'lots': quantities must match the regular expression "
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        id="PodGroup unparsable minResources quantity names the resource",
    ),
    pytest.param(
        cosched({"minMember": 2, "minResources": {"cpu": "-1"}}),
        cosched_ref(),
        "spec.minResources[cpu]",
        "must not be negative, got '-1'",
        id="PodGroup negative minResources quantity is a problem",
    ),
    pytest.param(
        cosched({"minMember": 2, "minResources": {"example.com/widgets": "1e19"}}),
        cosched_ref(),
        "spec.minResources[example.com/widgets]",
        "must be at most 10P, got '1e19'",
        id="PodGroup minResources above what troupe holds is a problem",
    ),
    pytest.param(
        workload(gang("workers", 4)),
        workload_ref("x"),
        "spec.podGroups",
        'pod group "x" doesn\'t exist for a workload "w" '
        '(named by its pods\' spec.workloadRef.podGroup; the workload has "workers")',
        id="Workload without the pod's pod group is upstream's problem",
    ),
    pytest.param(
        workload(*(gang(f"g{i}", 1) for i in range(9))),
        workload_ref("g0"),
        "spec.podGroups",
        "must have at most 8 items, got 9",
        id="Workload with more than 8 pod groups is a problem",
    ),
    pytest.param(
        workload(basic("a"), gang("b", 0)),
        workload_ref("b"),
        "spec.podGroups[1].policy.gang.minCount",
        "must be at least 1, got 0",
        id="Workload gang minCount 0 names the pod group's index",
    ),
    pytest.param(
        workload({"name": "a", "policy": {}}),
        workload_ref("a"),
        "spec.podGroups[0].policy",
        "must set exactly one of basic or gang, got neither",
        id="Workload pod group with no policy is a problem",
    ),
    pytest.param(
        workload({"name": "a", "policy": {"basic": {}, "gang": {"minCount": 2}}}),
        workload_ref("a"),
        "spec.podGroups[0].policy",
        "must set exactly one of basic or gang, got both",
        id="Workload pod group with two policies is a problem",
    ),
    pytest.param(
        pod_group({"schedulingPolicy": {"gang": {"minCount": -1}}}),
        pod_group_ref(),
        "spec.schedulingPolicy.gang.minCount",
        "must be at least 1, got -1",
        id="v1alpha2 PodGroup negative minCount is a problem",
    ),
    pytest.param(
        pod_group({}),
        pod_group_ref(),
        "spec.schedulingPolicy",
        "must set exactly one of basic or gang, got neither",
        id="v1alpha2 PodGroup without a policy is a problem",
    ),
    pytest.param(
        pod_group({"schedulingPolicy": {"basic": {}}, "disruptionMode": "Node"}),
        pod_group_ref(),
        "spec.disruptionMode",
        'unsupported value "Node": supported values: "Pod", "PodGroup"',
        id="v1alpha2 PodGroup unknown disruptionMode is a problem",
    ),
]


@pytest.mark.parametrize(("obj", "ref", "field", "message"), PROBLEMS)
def test_problem(obj: GroupObject, ref: GroupRef, field: str, message: str) -> None:
    assert policy_of(obj, ref, lookup) == GroupProblem(ref, field, message)


def test_a_problem_reads_as_object_field_and_message() -> None:
    problem = policy_of(cosched({"minMember": 0}), cosched_ref())
    assert (
        str(problem)
        == "scheduling.x-k8s.io/v1alpha1 team-a/pg: spec.minMember: must be at least 1, got 0"
    )


# --- parsing ---------------------------------------------------------------------------


def test_objects_parse_from_json_ignoring_unknown_fields() -> None:
    raw = (
        b'{"apiVersion":"scheduling.k8s.io/v1alpha2","kind":"PodGroup",'
        b'"metadata":{"name":"pg","namespace":"ns","resourceVersion":"5","managedFields":[]},'
        b'"spec":{"podGroupTemplateRef":{"workloadName":"w","podGroupTemplateName":"t"},'
        b'"schedulingPolicy":{"gang":{"minCount":3}},"futureField":1},'
        b'"status":{"conditions":[{"type":"PodGroupScheduled","status":"True",'
        b'"reason":"Scheduled","lastTransitionTime":"2026-01-01T00:00:00Z","extra":2}]}}'
    )
    pg = PodGroup.model_validate_json(raw)
    assert pg.spec.pod_group_template_ref is not None
    assert pg.spec.pod_group_template_ref.pod_group_template_name == "t"
    assert (
        pg.spec.scheduling_policy.gang is not None and pg.spec.scheduling_policy.gang.min_count == 3
    )
    assert [c.type for c in pg.status.conditions] == ["PodGroupScheduled"]


def test_workload_controller_ref_and_basic_presence_parse() -> None:
    wl = Workload.model_validate(
        {
            "spec": {
                "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "j"},
                "podGroups": [basic("a")],
            }
        }
    )
    assert wl.spec.controller_ref is not None and wl.spec.controller_ref.kind == "Job"
    assert wl.spec.pod_groups[0].policy.basic is not None
    assert wl.spec.pod_groups[0].policy.gang is None


def test_scheduler_plugins_status_parses() -> None:
    pg = CoschedulingPodGroup.model_validate(
        {
            "spec": {"minMember": 2},
            "status": {
                "phase": "Running",
                "occupiedBy": "ns/job",
                "running": 2,
                "scheduleStartTime": CREATED,
            },
        }
    )
    assert (pg.status.phase, pg.status.occupied_by, pg.status.running) == ("Running", "ns/job", 2)
    assert pg.status.schedule_start_time == CREATED


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(CREATED, CREATED_EPOCH, id="an RFC 3339 time is epoch seconds"),
        pytest.param(
            "2026-01-01T00:00:01.5+00:00", CREATED_EPOCH + 1.5, id="fractions and offsets parse"
        ),
        pytest.param(None, 0.0, id="no time is zero"),
        pytest.param("yesterday", 0.0, id="an unreadable time is zero"),
    ],
)
def test_parse_time(value: str | None, expected: float) -> None:
    assert parse_time(value) == expected


@pytest.mark.parametrize("api", list(GangApi), ids=lambda a: f"{a.value} objects know their API")
def test_model_and_api_agree(api: GangApi) -> None:
    obj = MODEL_OF[api]()
    assert api_of(obj) is api
    assert obj.api_version == api.value


def test_single_group_objects_name_their_own_ref() -> None:
    assert ref_of_object(cosched({"minMember": 1}, name="a")) == cosched_ref("a")
    assert ref_of_object(pod_group({}, name="b")) == pod_group_ref("b")


# --- invariants ---------------------------------------------------------------------------


@settings(max_examples=100)
@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_min_member_is_the_quorum_or_the_problem(min_member: int) -> None:
    verdict = policy_of(cosched({"minMember": min_member}), cosched_ref())
    if min_member >= 1:
        assert isinstance(verdict, GangPolicy) and verdict.gang and verdict.min_count == min_member
    else:
        assert isinstance(verdict, GroupProblem) and verdict.field == "spec.minMember"


@settings(max_examples=100)
@given(
    st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=8, unique=True), st.data()
)
def test_each_workload_pod_group_gets_its_own_policy(names: list[str], data: st.DataObject) -> None:
    counts = {n: data.draw(st.integers(min_value=1, max_value=50)) for n in names}
    wl = workload(*(gang(n, c) for n, c in counts.items()))
    for name, count in counts.items():
        verdict = policy_of(wl, workload_ref(name))
        assert isinstance(verdict, GangPolicy) and verdict.min_count == count
