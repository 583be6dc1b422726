"""resource.k8s.io/v1 models: upstream's JSON parses, defaults match the API server's,
unknown fields are ignored, and a bad object is named with its field."""

from __future__ import annotations

import pytest
from troupe.api.dra.objects import (
    DeviceClass,
    DeviceRequestAllocationResult,
    DraObjectError,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    load,
)

SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-1-gpus", "resourceVersion": "7"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "node-1", "generation": 2, "resourceSliceCount": 1},
        "nodeName": "node-1",
        "futureField": {"ignored": True},
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {
                    "model": {"string": "h100"},
                    "index": {"int": 0},
                    "driverVersion": {"version": "1.2.3"},
                    "ok": {"bool": True},
                },
                "capacity": {
                    "memory": {
                        "value": "80Gi",
                        "requestPolicy": {
                            "default": "1Gi",
                            "validRange": {"min": "1Gi", "step": "1Gi"},
                        },
                    }
                },
                "consumesCounters": [{"counterSet": "gpu-0", "counters": {"mem": {"value": 8}}}],
                "taints": [{"key": "k", "effect": "NoSchedule"}],
                "allowMultipleAllocations": True,
            }
        ],
    },
}


def test_a_slice_parses_with_its_devices() -> None:
    s = load(ResourceSlice, SLICE)
    device = s.spec.devices[0]
    assert (s.spec.pool.generation, s.spec.node_name, s.metadata.resource_version) == (
        2,
        "node-1",
        "7",
    )
    assert device.attributes["model"].string_value == "h100"
    assert device.attributes["index"].int_value == 0
    assert device.attributes["driverVersion"].version_value == "1.2.3"
    assert device.attributes["ok"].bool_value is True
    assert device.capacity["memory"].request_policy is not None
    assert device.capacity["memory"].request_policy.valid_range is not None
    assert device.capacity["memory"].request_policy.valid_range.step == "1Gi"
    assert device.consumes_counters[0].counters["mem"].value == "8"  # a bare number is a quantity
    assert device.taints[0].effect == "NoSchedule" and device.allow_multiple_allocations


def test_request_defaults_are_the_api_servers() -> None:
    claim = load(
        ResourceClaim,
        {
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "r", "exactly": {"deviceClassName": "gpu"}},
                        {"name": "p", "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}]},
                    ]
                }
            },
        },
    )
    exact = claim.spec.devices.requests[0].exactly
    assert exact is not None and (exact.allocation_mode, exact.count) == ("ExactCount", 1)
    assert claim.spec.devices.requests[1].first_available[0].count == 1
    assert claim.key == "ns/c" and claim.status.allocation is None


def test_a_template_and_a_class_parse() -> None:
    template = load(
        ResourceClaimTemplate,
        {
            "metadata": {"name": "t", "namespace": "ns"},
            "spec": {
                "spec": {
                    "devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "g"}}]}
                }
            },
        },
    )
    assert template.spec.spec.devices.requests[0].name == "r"
    cls = load(
        DeviceClass,
        {
            "metadata": {"name": "gpu"},
            "spec": {
                "selectors": [{"cel": {"expression": "true"}}],
                "config": [{"opaque": {"driver": "d", "parameters": {"a": [1]}}}],
            },
        },
    )
    assert cls.spec.selectors[0].cel is not None and cls.spec.config[0].opaque is not None
    assert cls.spec.config[0].opaque.parameters == {"a": [1]}


def test_allocation_results_write_shareID_and_omit_unset_fields() -> None:
    result = DeviceRequestAllocationResult(
        request="r", driver="d", pool="p", device="g", share_id="u-1"
    )
    dumped = result.model_dump(exclude_none=True)
    assert dumped["shareID"] == "u-1" and "adminAccess" not in dumped


@pytest.mark.parametrize(
    ("model", "data", "message"),
    [
        (
            ResourceClaim,
            {
                "metadata": {"name": "c", "namespace": "ns"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {"count": "two"}}]}},
            },
            "ResourceClaim ns/c: spec.devices.requests[0].exactly.count: must be a valid integer",
        ),
        (
            ResourceSlice,
            {"metadata": {"name": "s"}, "spec": {"pool": {"name": "p"}}},
            "ResourceSlice s: spec.driver: required field",
        ),
        (
            DeviceClass,
            {"metadata": {"name": "gpu"}, "spec": {"selectors": "true"}},
            "DeviceClass gpu: spec.selectors: ",
        ),
    ],
)
def test_a_bad_object_is_named_with_its_field(model: type, data: object, message: str) -> None:
    with pytest.raises(DraObjectError) as caught:
        load(model, data)
    assert message in str(caught.value)
