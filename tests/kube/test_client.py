"""KubeClient against a scripted transport: exact requests, what is retried, what raises."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from troupe.api.client import ApiError
from troupe.api.clock import FakeClock
from troupe.api.objects import ObjectMeta, Pod, PodCondition, PodSpec, PodStatus
from troupe.kube.client import KubeClient, custom_object_path, status_patch
from troupe.kube.retry import RetryPolicy
from troupe.kube.transport import MERGE_PATCH, STRATEGIC_MERGE_PATCH

from tests.kube.fakes import FakeTransport, reply, status_body

BINDING = "/api/v1/namespaces/ns/pods/p/binding"
STATUS = "/api/v1/namespaces/ns/pods/p/status"
POD = "/api/v1/namespaces/ns/pods/p"
WALL = 1_800_000_000.0  # FakeClock's default wall start: 2027-01-15T08:00:00Z


def pod(conditions: list[PodCondition] | None = None, nominated: str = "", node: str = "") -> Pod:
    return Pod(
        metadata=ObjectMeta(name="p", namespace="ns", uid="u-1", resource_version="5"),
        spec=PodSpec(node_name=node, scheduler_name="troupe-scheduler"),
        status=PodStatus(conditions=conditions or [], nominated_node_name=nominated),
    )


def client(
    transport: FakeTransport, clock: FakeClock | None = None, qps: float = -1, burst: int = 10
) -> KubeClient:
    return KubeClient(
        transport,
        clock or FakeClock(),
        qps=qps,
        burst=burst,
        scheduler_name="troupe-scheduler",
        instance="troupe-scheduler-host",
        retry=RetryPolicy(max_attempts=3, initial_backoff=0.0, max_backoff=0.0, jitter=0.0),
    )


# --- bind ---------------------------------------------------------------------------------


async def test_bind_is_one_post_of_a_compact_binding_with_the_uid() -> None:
    t = FakeTransport()
    t.script("POST", BINDING, reply(201, {"kind": "Status", "status": "Success", "code": 201}))
    await client(t).bind(pod(), "node-7")
    [sent] = t.sent
    assert (sent.method, sent.path, sent.content_type) == ("POST", BINDING, "application/json")
    assert sent.body == (
        b'{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p","namespace":"ns",'
        b'"uid":"u-1"},"target":{"apiVersion":"v1","kind":"Node","name":"node-7"}}'
    )


@pytest.mark.parametrize(
    ("replies", "status", "posts"),
    [
        pytest.param(
            [reply(409, status_body(409, "pod p is already assigned to node n2", "Conflict"))],
            409,
            1,
            id="already bound raises 409 without a retry",
        ),
        pytest.param(
            [reply(409, status_body(409, "Precondition failed: UID in precondition", "Conflict"))],
            409,
            1,
            id="a recreated pod (UID mismatch) raises 409 without a retry",
        ),
        pytest.param([reply(404)], 404, 1, id="a deleted pod raises 404 without a retry"),
        pytest.param([reply(503)] * 3, 503, 3, id="5xx is retried up to the attempt bound"),
        pytest.param([reply(400)], 400, 1, id="a bad request raises at once"),
    ],
)
async def test_bind_failures(replies: list[Any], status: int, posts: int) -> None:
    t = FakeTransport()
    t.script("POST", BINDING, *replies)
    with pytest.raises(ApiError) as err:
        await client(t).bind(pod(), "n1")
    assert err.value.status == status
    assert len(t.calls("POST", BINDING)) == posts
    assert not t.calls("GET")


async def test_bind_retries_a_transient_failure_then_succeeds() -> None:
    t = FakeTransport()
    t.script("POST", BINDING, ApiError(0, "connection reset"), reply(201))
    await client(t).bind(pod(), "n1")
    assert len(t.calls("POST", BINDING)) == 2


@pytest.mark.parametrize(
    ("bound_to", "uid", "succeeds"),
    [
        pytest.param("n1", "u-1", True, id="our lost binding landed: success, not a conflict"),
        pytest.param("n2", "u-1", False, id="someone else bound it: the 409 stands"),
        pytest.param("n1", "u-2", False, id="a recreated pod bound to the node: the 409 stands"),
    ],
)
async def test_a_409_after_an_unseen_outcome_checks_the_pod(
    bound_to: str, uid: str, succeeds: bool
) -> None:
    t = FakeTransport()
    t.script("POST", BINDING, ApiError(0, "timed out"), reply(409))
    current = pod(node=bound_to).model_copy(
        update={"metadata": ObjectMeta(name="p", namespace="ns", uid=uid)}
    )
    t.script("GET", POD, reply(200, current.model_dump(mode="json")))
    c = client(t)
    if succeeds:
        await c.bind(pod(), "n1")
    else:
        with pytest.raises(ApiError) as err:
            await c.bind(pod(), "n1")
        assert err.value.status == 409
    assert len(t.calls("GET", POD)) == 1


async def test_writes_wait_for_the_qps_limiter() -> None:
    t = FakeTransport()
    clock = FakeClock()
    c = client(t, clock, qps=2.0, burst=1)
    first = asyncio.create_task(c.bind(pod(), "n1"))
    second = asyncio.create_task(c.bind(pod(), "n2"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert first.done() and not second.done()
    assert len(t.sent) == 1
    clock.advance(0.5)
    await second
    assert len(t.sent) == 2


class SlowTransport(FakeTransport):
    """Every answer takes ``seconds`` of the fake clock."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        super().__init__()
        self.clock, self.seconds = clock, seconds

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        self.clock.advance(self.seconds)
        return await super().request(method, path, **kwargs)


async def test_binding_latencies_count_the_request_and_not_the_wait_for_a_token() -> None:
    clock = FakeClock()
    t = SlowTransport(clock, 0.3)
    c = client(t, clock, qps=2.0, burst=1)
    assert c.write_qps == 2.0
    await c.bind(pod(), "n1")
    second = asyncio.create_task(c.bind(pod(), "n2"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not second.done()  # waits 0.2 s more for its token
    clock.advance(0.2)
    await second
    assert c.take_binding_latencies() == pytest.approx([0.3, 0.3])
    assert c.take_binding_latencies() == []  # taken


async def test_only_answered_binding_attempts_are_timed() -> None:
    clock = FakeClock()
    t = SlowTransport(clock, 0.1)
    t.script("POST", BINDING, reply(503), ApiError(0, "connection reset"), reply(201))
    t.script("PATCH", STATUS, reply(200))
    c = client(t, clock)
    assert c.write_qps is None  # qps -1: no limiter
    await c.bind(pod(), "n1")
    await c.patch_pod_status(pod(), UNSCHED, None)
    # The 503 and the success; the reset had no answer, the status patch is no binding.
    assert c.take_binding_latencies() == pytest.approx([0.1, 0.1])


# --- pod status ---------------------------------------------------------------------------

UNSCHED = PodCondition(
    type="PodScheduled", status="False", reason="Unschedulable", message="0/3 nodes"
)


def _patch(p: Pod, condition: PodCondition | None, nominated: str | None) -> dict[str, Any] | None:
    body = status_patch(p, condition, nominated, WALL)
    return None if body is None else json.loads(body)


@pytest.mark.parametrize(
    ("p", "condition", "nominated", "expected"),
    [
        pytest.param(
            pod(),
            UNSCHED,
            None,
            {
                "status": {
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": "0/3 nodes",
                            "lastProbeTime": None,
                            "lastTransitionTime": "2027-01-15T08:00:00Z",
                        }
                    ]
                }
            },
            id="a new condition gets the transition time now and a null probe time",
        ),
        pytest.param(
            pod([UNSCHED.model_copy(update={"message": "old", "last_transition_time": "T0"})]),
            UNSCHED,
            None,
            {
                "status": {
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": "0/3 nodes",
                            "lastProbeTime": None,
                            "lastTransitionTime": "T0",
                        }
                    ]
                }
            },
            id="same status, new message: the transition time is kept",
        ),
        pytest.param(
            pod([UNSCHED.model_copy(update={"last_transition_time": "T0"})]),
            UNSCHED,
            None,
            None,
            id="an identical condition is not written at all",
        ),
        pytest.param(
            pod([UNSCHED.model_copy(update={"last_transition_time": "T0"})]),
            UNSCHED,
            "n3",
            {"status": {"nominatedNodeName": "n3"}},
            id="only the nominated node changed: only it is written",
        ),
        pytest.param(
            pod(nominated="n3"),
            None,
            "",
            {"status": {"nominatedNodeName": None}},
            id="an empty nominated node name clears the field with null",
        ),
        pytest.param(
            pod(nominated="n3"),
            None,
            None,
            None,
            id="None leaves the nominated node alone",
        ),
        pytest.param(
            pod(),
            None,
            "",
            None,
            id="clearing an absent nominated node writes nothing",
        ),
    ],
)
def test_status_patch_body(
    p: Pod, condition: PodCondition | None, nominated: str | None, expected: Any
) -> None:
    assert _patch(p, condition, nominated) == expected


async def test_status_patch_is_a_strategic_merge_patch_of_the_status_subresource() -> None:
    t = FakeTransport()
    await client(t).patch_pod_status(pod(), UNSCHED, "n1")
    [sent] = t.sent
    assert (sent.method, sent.path, sent.content_type) == ("PATCH", STATUS, STRATEGIC_MERGE_PATCH)
    assert sent.json()["status"]["nominatedNodeName"] == "n1"


async def test_status_patch_of_a_vanished_pod_is_ignored() -> None:
    t = FakeTransport()
    t.script("PATCH", STATUS, reply(404))
    await client(t).patch_pod_status(pod(), UNSCHED, None)


async def test_status_patch_other_errors_raise() -> None:
    t = FakeTransport()
    t.script("PATCH", STATUS, reply(422))
    with pytest.raises(ApiError):
        await client(t).patch_pod_status(pod(), UNSCHED, None)


# --- delete, evict, custom objects --------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "result"),
    [
        pytest.param(200, True, id="deleted"),
        pytest.param(404, False, id="already gone"),
        pytest.param(409, False, id="the name belongs to a new pod now"),
    ],
)
async def test_delete_pod(status: int, result: bool) -> None:
    t = FakeTransport()
    t.script("DELETE", POD, reply(status))
    assert await client(t).delete_pod(pod(), grace_period_seconds=0) is result
    assert t.sent[0].json() == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "u-1"},
        "gracePeriodSeconds": 0,
    }


async def test_evict_posts_a_policy_v1_eviction_and_does_not_retry_a_pdb_429() -> None:
    t = FakeTransport()
    t.script("POST", POD + "/eviction", reply(429, status_body(429, "would violate PDB")))
    with pytest.raises(ApiError) as err:
        await client(t).evict_pod(pod())
    assert err.value.status == 429 and "violate" in err.value.message
    [sent] = t.sent
    assert sent.json() == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "ns"},
        "deleteOptions": {"preconditions": {"uid": "u-1"}},
    }


async def test_evict_of_a_gone_pod_is_false() -> None:
    t = FakeTransport()
    t.script("POST", POD + "/eviction", reply(404))
    assert await client(t).evict_pod(pod()) is False


async def test_custom_objects_get_and_merge_patch() -> None:
    path = custom_object_path(
        "scheduling.x-k8s.io", "v1alpha1", "podgroups", "g", namespace="ns", subresource="status"
    )
    assert path == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/g/status"
    t = FakeTransport()
    t.script("GET", path, reply(200, {"status": {"phase": "Pending"}}), reply(404))
    t.script("PATCH", path, reply(200, {"status": {"phase": "Running"}}))
    c = client(t)
    assert await c.get_json(path) == {"status": {"phase": "Pending"}}
    assert await c.get_json(path) is None
    assert await c.merge_patch(path, {"status": {"phase": "Running"}}) == {
        "status": {"phase": "Running"}
    }
    patch = t.calls("PATCH")[0]
    assert patch.content_type == MERGE_PATCH
    assert patch.body == b'{"status":{"phase":"Running"}}'
