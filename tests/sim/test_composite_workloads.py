"""The Kubernetes 1.37 Workload at v1alpha3 in the embedded cluster: one storage with
v1beta1 and v1alpha2, ``compositePodGroupTemplates`` shown only at v1alpha3, upstream's
validation of the template tree, and the real kubectl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.sim.conftest import Http, kubectl

ALPHA3 = "/apis/scheduling.k8s.io/v1alpha3/namespaces/default/workloads"
BETA = "/apis/scheduling.k8s.io/v1beta1/namespaces/default/workloads"
ALPHA2 = "/apis/scheduling.k8s.io/v1alpha2/namespaces/default/workloads"


def gang(name: str, min_count: int) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"gang": {"minCount": min_count}}}


def composite_template(name: str = "job", min_groups: int = 2, **fields: Any) -> dict[str, Any]:
    children = {"podGroupTemplates": [gang("driver", 1), gang("workers", 6)]}
    return {
        "name": name,
        "schedulingPolicy": {"gang": {"minGroupCount": min_groups}},
        **(children if not fields else {}),
        **fields,
    }


def workload(spec: dict[str, Any], name: str = "job") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def driver_and_workers() -> dict[str, Any]:
    return workload({"compositePodGroupTemplates": [composite_template()]})


def nested(levels: int) -> dict[str, Any]:
    """A chain of ``levels`` composite templates with one PodGroup template at the end:
    ``levels + 1`` levels of templates."""
    template = composite_template(f"level-{levels}", 1, podGroupTemplates=[gang("leaf", 1)])
    for level in range(levels - 1, 0, -1):
        template = composite_template(f"level-{level}", 1, compositePodGroupTemplates=[template])
    return template


def causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in body["details"]["causes"]]


async def test_discovery_lists_the_workload_at_v1alpha3(http: Http) -> None:
    code, listed = await http.get("/apis/scheduling.k8s.io/v1alpha3")
    assert code == 200
    kinds = {r["name"]: r["kind"] for r in listed["resources"]}
    assert kinds["workloads"] == "Workload"


async def test_composite_templates_show_at_v1alpha3_only_and_are_kept_by_v1beta1_writes(
    http: Http,
) -> None:
    code, created = await http.post(ALPHA3, driver_and_workers())
    assert code == 201, created
    assert created["spec"]["compositePodGroupTemplates"] == [composite_template()]
    for path in (BETA, ALPHA2):
        code, seen = await http.get(f"{path}/job")
        assert code == 200
        assert "compositePodGroupTemplates" not in seen["spec"]
        assert "podGroupTemplates" not in seen["spec"]
    _, beta = await http.get(f"{BETA}/job")
    beta["metadata"]["labels"] = {"team": "ml"}
    code, written = await http.put(f"{BETA}/job", beta)
    assert code == 200, written
    _, alpha3 = await http.get(f"{ALPHA3}/job")
    assert alpha3["metadata"]["labels"] == {"team": "ml"}
    assert alpha3["spec"]["compositePodGroupTemplates"] == [composite_template()]


async def test_a_v1beta1_workload_reads_back_at_v1alpha3(http: Http) -> None:
    beta = workload({"podGroupTemplates": [gang("workers", 2)]})
    beta["apiVersion"] = "scheduling.k8s.io/v1beta1"
    code, _ = await http.post(BETA, beta)
    assert code == 201
    code, alpha3 = await http.get(f"{ALPHA3}/job")
    assert code == 200
    assert alpha3["apiVersion"] == "scheduling.k8s.io/v1alpha3"
    assert alpha3["spec"]["podGroupTemplates"] == [gang("workers", 2)]


async def test_composite_templates_written_at_v1beta1_are_dropped(http: Http) -> None:
    beta = workload(
        {"podGroupTemplates": [gang("w", 1)], "compositePodGroupTemplates": [composite_template()]}
    )
    beta["apiVersion"] = "scheduling.k8s.io/v1beta1"
    code, created = await http.post(BETA, beta)
    assert code == 201, created
    _, alpha3 = await http.get(f"{ALPHA3}/job")
    assert "compositePodGroupTemplates" not in alpha3["spec"]


PATH = "spec.compositePodGroupTemplates[0]"
UNION = "`podGroupTemplates`, `compositePodGroupTemplates`"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {},
            [("spec", f'Invalid value: "": must specify one of: {UNION}')],
            id="neither list",
        ),
        pytest.param(
            {
                "podGroupTemplates": [gang("w", 1)],
                "compositePodGroupTemplates": [composite_template()],
            },
            [
                (
                    "spec",
                    f'Invalid value: "{{{UNION}}}": exactly one of {UNION} is required, '
                    "but multiple fields are set",
                )
            ],
            id="both lists",
        ),
        pytest.param(
            {"compositePodGroupTemplates": [composite_template(f"c{i}") for i in range(9)]},
            [("spec.compositePodGroupTemplates", "Too many: 9: must have at most 8 items")],
            id="nine composite templates",
        ),
        pytest.param(
            {"compositePodGroupTemplates": [nested(3)]},
            [],
            id="four levels are allowed",
        ),
        pytest.param(
            {"compositePodGroupTemplates": [nested(4)]},
            [
                (
                    f"{PATH}.compositePodGroupTemplates[0].compositePodGroupTemplates[0]"
                    ".compositePodGroupTemplates[0].podGroupTemplates",
                    "Forbidden: the tree of templates may be at most 4 levels deep",
                )
            ],
            id="five levels",
        ),
        pytest.param(
            {"compositePodGroupTemplates": [composite_template("Driver_Job")]},
            [
                (
                    f"{PATH}.name",
                    'Invalid value: "Driver_Job": a lowercase RFC 1123 label must consist of '
                    "lower case alphanumeric characters or '-', and must start and end with an "
                    "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                )
            ],
            id="name not a DNS label",
        ),
        pytest.param(
            {"compositePodGroupTemplates": [composite_template(), composite_template()]},
            [("spec.compositePodGroupTemplates[1].name", 'Duplicate value: "job"')],
            id="duplicate names",
        ),
        pytest.param(
            {"compositePodGroupTemplates": [composite_template(min_groups=0)]},
            [(f"{PATH}.schedulingPolicy.gang.minGroupCount", "Required value")],
            id="minGroupCount unset",
        ),
        pytest.param(
            {"compositePodGroupTemplates": [composite_template(min_groups=-1)]},
            [
                (
                    f"{PATH}.schedulingPolicy.gang.minGroupCount",
                    "Invalid value: -1: must be greater than or equal to 1",
                )
            ],
            id="minGroupCount below 1",
        ),
        pytest.param(
            {
                "compositePodGroupTemplates": [
                    composite_template(podGroupTemplates=[gang("w", 0)], priority=2_000_000_000)
                ]
            },
            [
                (
                    f"{PATH}.priority",
                    "Invalid value: 2000000000: must be less than or equal to 1000000000",
                ),
                (f"{PATH}.podGroupTemplates[0].schedulingPolicy.gang.minCount", "Required value"),
            ],
            id="priority too high and a child gang without minCount",
        ),
    ],
)
async def test_upstream_validation_of_composite_templates(
    http: Http, spec: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    code, answer = await http.post(ALPHA3, workload(spec))
    if not expected:
        assert code == 201, answer
        return
    assert code == 422, answer
    assert answer["reason"] == "Invalid"
    assert causes(answer) == expected


async def test_composite_templates_cannot_be_added_or_removed_but_min_group_count_changes(
    http: Http,
) -> None:
    code, _ = await http.post(ALPHA3, driver_and_workers())
    assert code == 201
    _, current = await http.get(f"{ALPHA3}/job")
    current["spec"]["compositePodGroupTemplates"][0]["schedulingPolicy"]["gang"][
        "minGroupCount"
    ] = 1
    code, answer = await http.put(f"{ALPHA3}/job", current)
    assert code == 200, answer
    _, current = await http.get(f"{ALPHA3}/job")
    template = current["spec"]["compositePodGroupTemplates"][0]
    template["podGroupTemplates"].pop()
    template["priority"] = 5
    current["spec"]["compositePodGroupTemplates"].append(composite_template("extra"))
    code, answer = await http.put(f"{ALPHA3}/job", current)
    assert code == 422
    assert causes(answer) == [
        ("spec.compositePodGroupTemplates", 'Forbidden: may not add item "extra"'),
        (f"{PATH}.priority", "Invalid value: 5: field is immutable"),
        (f"{PATH}.podGroupTemplates", 'Forbidden: may not remove item "workers"'),
    ]


async def test_kubectl_applies_and_gets_a_v1alpha3_workload(http: Http, kubeconfig: Path) -> None:
    code, out, err = await kubectl(
        kubeconfig, "apply", "-f", "-", stdin=json.dumps(driver_and_workers())
    )
    assert code == 0, err
    assert "workload.scheduling.k8s.io/job created" in out
    code, out, err = await kubectl(
        kubeconfig, "get", "workloads.v1alpha3.scheduling.k8s.io", "job", "-o", "json"
    )
    assert code == 0, err
    got = json.loads(out)
    assert got["apiVersion"] == "scheduling.k8s.io/v1alpha3"
    assert got["spec"]["compositePodGroupTemplates"] == [composite_template()]
    changed = driver_and_workers()
    changed["spec"]["compositePodGroupTemplates"][0]["schedulingPolicy"]["gang"][
        "minGroupCount"
    ] = 1
    code, out, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(changed))
    assert code == 0, err
    code, out, err = await kubectl(
        kubeconfig, "get", "workloads.v1alpha3.scheduling.k8s.io", "job", "-o", "json"
    )
    policy = json.loads(out)["spec"]["compositePodGroupTemplates"][0]["schedulingPolicy"]
    assert policy == {"gang": {"minGroupCount": 1}}
    code, out, err = await kubectl(kubeconfig, "get", "workloads", "job", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["apiVersion"] == "scheduling.k8s.io/v1beta1"
