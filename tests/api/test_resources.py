"""Pod requests and node allocatable follow upstream PodRequests / calculateResource."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.objects import Node, Pod
from troupe.api.quantity import MAX_AMOUNT, AmountTooLarge, QuantityError, resource_to_int
from troupe.api.resources import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    EPHEMERAL_STORAGE,
    MEMORY,
    ResourceVector,
    node_allocatable,
    pod_nonzero_requests,
    pod_requests,
)

GI = 2**30
MI = 2**20


def ctr(
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    sidecar: bool = False,
) -> dict[str, Any]:
    """A container as the API sends it; ``sidecar`` sets restartPolicy Always."""
    body: dict[str, Any] = {"resources": {"requests": requests or {}, "limits": limits or {}}}
    if sidecar:
        body["restartPolicy"] = "Always"
    return body


def make_pod(
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    overhead: dict[str, str] | None = None,
) -> Pod:
    for i, body in enumerate([*(containers or []), *(init or [])]):
        body.setdefault("name", f"c{i}")
    spec: dict[str, Any] = {"containers": containers or [], "initContainers": init or []}
    if overhead:
        spec["overhead"] = overhead
    return Pod.model_validate({"metadata": {"namespace": "ns", "name": "p"}, "spec": spec})


REQUESTS = [
    pytest.param(
        make_pod([ctr({"cpu": "100m", "memory": "1Gi"})]),
        {CPU: 100, MEMORY: GI},
        id="one container's requests are the pod's requests",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "100m"}), ctr({"cpu": "250m", "memory": "1Mi"})]),
        {CPU: 350, MEMORY: MI},
        id="regular containers are summed",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], init=[ctr({"cpu": "2"})]),
        {CPU: 2000},
        id="an init container larger than the sum sets the request",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1", "memory": "1Gi"})], init=[ctr({"cpu": "500m"})]),
        {CPU: 1000, MEMORY: GI},
        id="a smaller init container adds nothing",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], init=[ctr({"cpu": "3"}), ctr({"memory": "2Gi"})]),
        {CPU: 3000, MEMORY: 2 * GI},
        id="init containers are maxed per resource",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], init=[ctr({"cpu": "500m"}, sidecar=True)]),
        {CPU: 1500},
        id="a sidecar is added to the containers' sum",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], init=[ctr({"cpu": "1"}, sidecar=True), ctr({"cpu": "2"})]),
        {CPU: 3000},
        id="a sidecar keeps running while later init containers run",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], init=[ctr({"cpu": "2"}), ctr({"cpu": "1"}, sidecar=True)]),
        {CPU: 2000},
        id="an init container before a sidecar does not count it",
    ),
    pytest.param(
        make_pod(
            [ctr({"cpu": "100m"})],
            init=[ctr({"cpu": "1"}, sidecar=True), ctr({"cpu": "1"}, sidecar=True)],
        ),
        {CPU: 2100},
        id="several sidecars are all added to the sum",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], overhead={"cpu": "250m", "memory": "120Mi"}),
        {CPU: 1250, MEMORY: 120 * MI},
        id="overhead is added on top",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], init=[ctr({"cpu": "4"})], overhead={"cpu": "1"}),
        {CPU: 5000},
        id="overhead is added after the init maximum",
    ),
    pytest.param(
        make_pod([ctr(limits={"cpu": "2", "memory": "1Gi"})]),
        {CPU: 2000, MEMORY: GI},
        id="a limit without a request becomes the request",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "100m"}, limits={"cpu": "2", "memory": "1Gi"})]),
        {CPU: 100, MEMORY: GI},
        id="limit defaulting is per resource and never raises a request",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], init=[ctr(limits={"cpu": "3"})]),
        {CPU: 3000},
        id="init container limits default their requests too",
    ),
    pytest.param(
        make_pod([ctr({"nvidia.com/gpu": "1"}), ctr(limits={"nvidia.com/gpu": "2"})]),
        {"nvidia.com/gpu": 3},
        id="extended resources are summed in units",
    ),
    pytest.param(
        make_pod([ctr({"hugepages-2Mi": "4Mi", EPHEMERAL_STORAGE: "1G"})]),
        {"hugepages-2Mi": 4 * MI, EPHEMERAL_STORAGE: 10**9},
        id="hugepages and ephemeral storage are bytes",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "0", "memory": "1Mi"})]),
        {MEMORY: MI},
        id="zero requests are omitted",
    ),
    pytest.param(make_pod(), {}, id="a pod without containers requests nothing"),
    pytest.param(
        make_pod([ctr({"cpu": "0.5m"}), ctr({"cpu": "0.5m"})]),
        {CPU: 1},
        id="sub-millicore requests are summed before rounding up",
    ),
]


@pytest.mark.parametrize(("pod", "expected"), REQUESTS)
def test_pod_requests(pod: Pod, expected: ResourceVector) -> None:
    assert pod_requests(pod) == expected


NONZERO = [
    pytest.param(
        make_pod([ctr()]),
        (100, DEFAULT_MEMORY_REQUEST),
        id="a container without requests counts 100m and 200Mi",
    ),
    pytest.param(
        make_pod([ctr(), ctr()]),
        (200, 2 * DEFAULT_MEMORY_REQUEST),
        id="every request-less container adds the defaults",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "0", "memory": "0"})]),
        (0, 0),
        id="an explicit zero request stays zero",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "250m"})]),
        (250, DEFAULT_MEMORY_REQUEST),
        id="only the missing resource is defaulted",
    ),
    pytest.param(
        make_pod([ctr(limits={"cpu": "2", "memory": "1Gi"})]),
        (2000, GI),
        id="a limit counts as the request before defaults",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "50m", "memory": "10Mi"})], init=[ctr()]),
        (100, DEFAULT_MEMORY_REQUEST),
        id="a request-less init container counts the defaults in the maximum",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1", "memory": "1Gi"})], init=[ctr(sidecar=True)]),
        (1100, GI + DEFAULT_MEMORY_REQUEST),
        id="a request-less sidecar adds the defaults to the sum",
    ),
    pytest.param(
        make_pod([ctr()], overhead={"cpu": "10m", "memory": "1Mi"}),
        (110, DEFAULT_MEMORY_REQUEST + MI),
        id="overhead is added to the non-zero requests",
    ),
    pytest.param(make_pod(), (0, 0), id="a pod without containers scores as zero"),
]


@pytest.mark.parametrize(("pod", "expected"), NONZERO)
def test_pod_nonzero_requests(pod: Pod, expected: tuple[int, int]) -> None:
    assert pod_nonzero_requests(pod) == expected


def make_node(allocatable: dict[str, str], capacity: dict[str, str]) -> Node:
    return Node.model_validate(
        {"metadata": {"name": "n1"}, "status": {"allocatable": allocatable, "capacity": capacity}}
    )


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        pytest.param(
            make_node({"cpu": "3800m", "memory": "14Gi", "pods": "110"}, {"cpu": "4"}),
            {CPU: 3800, MEMORY: 14 * GI, "pods": 110},
            id="allocatable wins over capacity",
        ),
        pytest.param(
            make_node({"cpu": "4"}, {"cpu": "4", "nvidia.com/gpu": "8"}),
            {CPU: 4000, "nvidia.com/gpu": 8},
            id="capacity stands in for a resource missing from allocatable",
        ),
        pytest.param(
            make_node({"nvidia.com/gpu": "0"}, {}),
            {"nvidia.com/gpu": 0},
            id="a zero allocatable is kept",
        ),
        pytest.param(make_node({}, {}), {}, id="a node reporting nothing offers nothing"),
    ],
)
def test_node_allocatable(node: Node, expected: ResourceVector) -> None:
    assert node_allocatable(node) == expected


def test_a_malformed_quantity_names_the_pod_and_field() -> None:
    pod = make_pod([ctr({"cpu": "1"}), ctr({"memory": "12x"})])
    with pytest.raises(QuantityError) as caught:
        pod_requests(pod)
    message = str(caught.value)
    assert "pod ns/p: spec.containers[1].resources.requests[memory]" in message
    assert "invalid quantity '12x'" in message


@pytest.mark.parametrize(
    ("containers", "field", "value"),
    [
        ([ctr({"cpu": "-500m"})], "containers[0].resources.requests[cpu]", "-500m"),
        (
            [ctr({"cpu": "1"}), ctr({"memory": "-1Gi"})],
            "containers[1].resources.requests[memory]",
            "-1Gi",
        ),
        ([ctr({}, {"cpu": "-1"})], "containers[0].resources.limits[cpu]", "-1"),
    ],
    ids=["a negative cpu request", "a negative memory request", "a negative limit"],
)
def test_a_negative_quantity_is_refused_as_the_api_server_validates(
    containers: list[Any], field: str, value: str
) -> None:
    # ValidateNonnegativeQuantity: a pod asking for less than nothing would hand its
    # node's capacity to other pods.
    with pytest.raises(QuantityError) as caught:
        pod_requests(make_pod(containers))
    message = str(caught.value)
    assert f"pod ns/p: spec.{field}" in message
    assert f"invalid quantity {value!r}: must be greater than or equal to 0" in message


def test_a_malformed_allocatable_names_the_node() -> None:
    with pytest.raises(QuantityError, match=r"node n1: status.allocatable\[cpu\]"):
        node_allocatable(make_node({"cpu": "four"}, {}))


# --- amounts past what troupe holds (MAX_AMOUNT: 10T cores, 10P of anything else) ----

TOO_LARGE_NODES = [
    pytest.param(
        {"cpu": "64", "example.com/widgets": "1e19"},
        {},
        "status.allocatable[example.com/widgets]",
        "'1e19'",
        id="1e19 of an extended resource (past int64)",
    ),
    pytest.param({"cpu": "9.3e15"}, {}, "status.allocatable[cpu]", "'9.3e15'", id="9.3e15 cores"),
    pytest.param(
        {"memory": "10000000000000001"},
        {},
        "status.allocatable[memory]",
        "'10000000000000001'",
        id="one byte past 10P",
    ),
    pytest.param(
        {"cpu": "4"},
        {"cpu": "1e19", "ephemeral-storage": "8Ei"},
        "status.capacity[ephemeral-storage]",
        "'8Ei'",
        id="capacity standing in for allocatable is held to the limit",
    ),
]


@pytest.mark.parametrize(("allocatable", "capacity", "field", "value"), TOO_LARGE_NODES)
def test_a_node_offering_more_than_troupe_holds_is_refused_naming_the_field(
    allocatable: dict[str, str], capacity: dict[str, str], field: str, value: str
) -> None:
    with pytest.raises(AmountTooLarge) as caught:
        node_allocatable(make_node(allocatable, capacity))
    assert str(caught.value) == (
        f"node n1: {field}: invalid quantity {value}: more than troupe can hold (at most "
        f"{'10T' if field.endswith('[cpu]') else '10P'})"
    )


def test_a_node_at_the_limit_is_held_exactly() -> None:
    node = make_node({"cpu": "10T", "memory": "10P", "example.com/w": "1e16"}, {"cpu": "1e19"})
    assert node_allocatable(node) == {
        CPU: MAX_AMOUNT,
        MEMORY: MAX_AMOUNT,
        "example.com/w": MAX_AMOUNT,
    }


@pytest.mark.parametrize(
    ("pod", "field", "value"),
    [
        pytest.param(
            make_pod([ctr({"cpu": "1"}), ctr({"cpu": "1e18"})]),
            "spec.containers[1].resources.requests[cpu]",
            "'1e18'",
            id="one container asking 1e18 cores",
        ),
        pytest.param(
            make_pod([ctr({}, {"example.com/w": "1e19"})]),
            "spec.containers[0].resources.limits[example.com/w]",
            "'1e19'",
            id="a limit standing in for the request",
        ),
        pytest.param(
            make_pod([ctr({"memory": "6P"}), ctr({"memory": "6P"})]),
            "spec (containers, init containers and overhead together)[memory]",
            "'12P'",
            id="containers that are each within the limit but not together",
        ),
    ],
)
def test_a_pod_asking_more_than_troupe_holds_is_refused_or_capped(
    pod: Pod, field: str, value: str
) -> None:
    with pytest.raises(AmountTooLarge) as caught:
        pod_requests(pod)
    assert str(caught.value).startswith(f"pod ns/p: {field}: invalid quantity {value}: ")
    # An assigned pod is counted at the limit instead.
    resource = caught.value.resource_name
    assert pod_requests(pod, cap=True)[resource] == MAX_AMOUNT
    assert all(v <= MAX_AMOUNT for v in pod_nonzero_requests(pod))


def test_the_nonzero_defaults_do_not_lift_a_request_past_the_limit() -> None:
    pod = make_pod([ctr({"cpu": "10T", "memory": "10P"}), ctr({})])
    assert pod_requests(pod) == {CPU: MAX_AMOUNT, MEMORY: MAX_AMOUNT}
    assert pod_nonzero_requests(pod) == (MAX_AMOUNT, MAX_AMOUNT)


# --- properties ----------------------------------------------------------------------

_quantities = st.builds(
    lambda amount, suffix: f"{amount}{suffix}",
    st.integers(0, 5000),
    st.sampled_from(["", "m", "n", "k", "Mi", "Gi"]),
)
_resource_maps = st.dictionaries(
    st.sampled_from([CPU, MEMORY, "nvidia.com/gpu", EPHEMERAL_STORAGE]), _quantities, max_size=4
)
_containers = st.builds(
    lambda requests, limits, sidecar: ctr(requests, limits, sidecar),
    _resource_maps,
    _resource_maps,
    st.booleans(),
)


@settings(max_examples=150)
@given(
    st.lists(_containers, max_size=4),
    st.lists(_containers, max_size=4),
    _resource_maps,
)
def test_pod_requests_cover_every_single_container(
    containers: list[dict[str, Any]], init: list[dict[str, Any]], overhead: dict[str, str]
) -> None:
    for body in containers:
        body.pop("restartPolicy", None)  # only init containers can be sidecars
    pod = make_pod(containers, init, overhead)
    # Thousands of Gi cores together pass what troupe holds: the total is then capped
    # (an assigned pod) or refused naming the resource (a pending one).
    total = pod_requests(pod, cap=True)
    try:
        assert pod_requests(pod) == total
    except AmountTooLarge as err:
        assert total[err.resource_name] == MAX_AMOUNT
    for container in [*pod.spec.containers, *pod.spec.init_containers]:
        effective = {**container.resources.limits, **container.resources.requests}
        for name, text in effective.items():
            assert total.get(name, 0) >= min(resource_to_int(name, text), MAX_AMOUNT), name
    cpu, memory = pod_nonzero_requests(pod)
    assert cpu >= total.get(CPU, 0)
    assert memory >= total.get(MEMORY, 0)
