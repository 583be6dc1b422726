"""StorageCapacityScoring (troupe/plugins/volumebinding/scorer.py) and VolumeBindingArgs
(args.py): upstream's scorer on static bindings and on provisions, the default
shape, and the args' defaults and validation messages."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from troupe.plugins.volumebinding.args import VolumeBindingArgs
from troupe.plugins.volumebinding.model import BindingInfo, DynamicProvision, PodVolumes
from troupe.plugins.volumebinding.scorer import score

from tests.plugins.storage_builders import capacity, make_pv, make_pvc

DEFAULT = VolumeBindingArgs().function_shape()
# The shape of upstream's VolumeCapacityPriority tests: fuller PVs score higher.
PACKING = VolumeBindingArgs.model_validate(
    {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
).function_shape()


def static(claim: str, request: str, pv: str, size: str, cls: str = "local") -> BindingInfo:
    return BindingInfo(
        make_pvc(claim).cls(cls).request(request).obj(),
        make_pv(pv).cls(cls).capacity(size).obj(),
    )


def provision(claim: str, request: str, room: str | None, cls: str = "fast") -> DynamicProvision:
    cap = None if room is None else capacity("c", cls, topology={}, capacity=room)
    return DynamicProvision(make_pvc(claim).cls(cls).request(request).obj(), cap)


CASES = [
    pytest.param(PodVolumes(), DEFAULT, 0, id="nothing to bind scores 0"),
    pytest.param(
        PodVolumes((static("a", "50Gi", "pv", "200Gi"),)), DEFAULT, 75,
        id="a PV four times the claim is 25% used: 75 with the default shape",
    ),
    pytest.param(
        PodVolumes((static("a", "50Gi", "pv", "100Gi"),)), DEFAULT, 50,
        id="a PV twice the claim: 50",
    ),
    pytest.param(
        PodVolumes((static("a", "50Gi", "pv", "200Gi"),)), PACKING, 25,
        id="with a packing shape the tighter PV wins instead",
    ),
    pytest.param(
        PodVolumes((static("a", "50Gi", "pv-1", "200Gi"), static("b", "50Gi", "pv-2", "200Gi"))),
        DEFAULT, 75,
        id="claims of one class add up, requests and capacities",
    ),
    pytest.param(
        PodVolumes((static("a", "50Gi", "pv-1", "200Gi"),
                    static("b", "50Gi", "pv-2", "100Gi", cls="hdd"))),
        DEFAULT, 63,
        id="classes are averaged and rounded half away from zero",
    ),
    pytest.param(
        PodVolumes((static("a", "50Gi", "pv", "0"),)), DEFAULT, 0,
        id="a PV without capacity counts as full",
    ),
    pytest.param(
        PodVolumes((), (provision("a", "10Gi", "100Gi"),)), DEFAULT, 90,
        id="a provision is scored against its node's capacity",
    ),
    pytest.param(
        PodVolumes((), (provision("a", "10Gi", "100Gi"), provision("b", "30Gi", "100Gi"))),
        DEFAULT, 60,
        id="provisions of one class share the node's capacity, not add to it",
    ),
    pytest.param(
        PodVolumes((), (provision("a", "10Gi", None),)), DEFAULT, 0,
        id="a provision without tracked capacity is not measured",
    ),
    pytest.param(
        PodVolumes((static("a", "50Gi", "pv", "100Gi"),), (provision("b", "10Gi", "100Gi"),)),
        DEFAULT, 50,
        id="static bindings, when there are some, are what is scored",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("volumes", "shape", "expected"), CASES)
def test_storage_capacity_score(volumes: PodVolumes, shape: object, expected: int) -> None:
    assert score(volumes, shape) == expected  # type: ignore[arg-type]


def test_args_default_to_upstreams() -> None:
    args = VolumeBindingArgs()
    assert args.bind_timeout_seconds == 600
    assert [(p.utilization, p.score) for p in args.shape] == [(0, 10), (100, 0)]
    assert VolumeBindingArgs.model_validate({"shape": []}).shape == args.shape


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(
            {"bindTimeoutSeconds": -1},
            "bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, "
            "should not be a negative value",
            id="a negative timeout",
        ),
        pytest.param(
            {"shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]},
            "shape[1].utilization: Invalid value: 10: values must be sorted in increasing order",
            id="an unsorted shape",
        ),
        pytest.param(
            {"shape": [{"utilization": 101, "score": 11}]},
            "shape[0].utilization: Invalid value: 101: not in valid range [0, 100]; "
            "shape[0].score: Invalid value: 11: not in valid range [0, 10]",
            id="points out of range",
        ),
        pytest.param({"bindTimeout": 5}, "bindTimeout", id="an unknown field"),
    ],
)
def test_bad_args_name_the_field(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        VolumeBindingArgs.model_validate(raw)
    assert message in str(raised.value)
