"""What the embedded API server refuses to protect a scheduler: pods' and nodes'
quantities (malformed, negative, a request above its limit) and custom resources that
break their CRD's structural schema (the shipped PodGroup CRD's included), with
kube-apiserver's status and wording, through the real kubectl and raw HTTP. Writes
straight into the store are not validated (tests use them to stand for objects a real
server accepted)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from troupe.sim.apiserver import ApiServer
from troupe.sim.crds import POD_GROUP_CRD

from tests.sim.conftest import Http, kubectl, pod

PODS = "/api/v1/namespaces/default/pods"
NODES = "/api/v1/nodes"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"
REGEX_ERROR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def sized_pod(
    name: str,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    *,
    init: bool = False,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    container = {"name": "c", "image": "busybox", "resources": resources}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if init:
        spec["initContainers"] = [container]
    else:
        spec["containers"] = [container]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def test_kubectl_refuses_a_negative_request_naming_the_field(kubeconfig: Path) -> None:
    code, out, err = await kubectl(
        kubeconfig, "apply", "-f", "-", stdin=json.dumps(sized_pod("neg", {"cpu": "-1"}))
    )
    assert code == 1 and out == ""
    assert 'The Pod "neg" is invalid' in err
    assert (
        'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": '
        "must be greater than or equal to 0"
    ) in err
    assert (await kubectl(kubeconfig, "get", "pod", "neg"))[0] == 1


async def test_kubectl_refuses_a_malformed_quantity_as_the_decoder_does(kubeconfig: Path) -> None:
    code, _, err = await kubectl(
        kubeconfig, "create", "-f", "-", stdin=json.dumps(sized_pod("bad", {"memory": "lots"}))
    )
    assert code == 1
    assert "BadRequest" in err and 'Pod in version "v1" cannot be handled as a Pod' in err
    assert REGEX_ERROR in err


async def test_refusals_over_http(http: Http) -> None:
    code, body = await http.post(PODS, sized_pod("suffix", {"cpu": "1kk"}))
    assert (code, body["reason"]) == (400, "BadRequest")
    assert body["message"].endswith("unable to parse quantity's suffix")

    code, body = await http.post(PODS, sized_pod("init", limits={"memory": "-1Gi"}, init=True))
    assert (code, body["reason"]) == (422, "Invalid")
    # The limit is defaulted into the missing request before validation, as upstream.
    negative = 'Invalid value: "-1Gi": must be greater than or equal to 0'
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": negative,
            "field": f"spec.initContainers[0].resources.{part}[memory]",
        }
        for part in ("limits", "requests")
    ]

    code, body = await http.post(PODS, sized_pod("over", {"cpu": "2"}, {"cpu": "1"}))
    assert code == 422
    assert body["message"] == (
        'Pod "over" is invalid: spec.containers[0].resources.requests: Invalid value: "2": '
        "must be less than or equal to cpu limit of 1"
    )

    overhead = pod("overhead", overhead={"cpu": "-100m"})
    code, body = await http.post(PODS, overhead)
    assert code == 422 and "spec.overhead[cpu]" in body["message"]

    # Valid forms, numbers included, are accepted.
    fine = sized_pod("fine", {"cpu": "500m", "memory": 1024}, {"cpu": 1, "memory": "1Gi"})
    assert (await http.post(PODS, fine))[0] == 201


async def test_an_update_is_validated_and_the_status_subresource_leaves_spec_alone(
    server: ApiServer, http: Http
) -> None:
    # Stored without validation, as an object a real server accepted long ago.
    server.store.create("pods", sized_pod("old", {"cpu": "-1"}))
    code, current = await http.get(f"{PODS}/old")
    current["metadata"]["labels"] = {"a": "b"}
    code, body = await http.put(f"{PODS}/old", current)
    assert code == 422 and "requests[cpu]" in body["message"]
    # The scheduler can still tell the pod why it is not scheduled.
    condition = {"type": "PodScheduled", "status": "False", "reason": "InvalidQuantity"}
    code, _ = await http.patch(
        f"{PODS}/old/status",
        {"status": {"conditions": [condition]}},
        "application/strategic-merge-patch+json",
    )
    assert code == 200


async def test_nodes_with_unusable_capacity_or_allocatable_are_refused(http: Http) -> None:
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"capacity": {"cpu": "4", "pods": "110"}, "allocatable": {"cpu": "-1"}},
    }
    code, body = await http.post(NODES, node)
    assert code == 422
    assert body["message"] == (
        'Node "n1" is invalid: status.allocatable.cpu: Invalid value: "-1": '
        "must be greater than or equal to 0"
    )
    node["status"]["allocatable"] = {"memory": "1Q"}
    assert (await http.post(NODES, node))[0] == 400
    node["status"]["allocatable"] = {"cpu": "4"}
    code, created = await http.post(NODES, node)
    assert code == 201
    created["status"]["capacity"]["cpu"] = "-4"
    code, body = await http.put(f"{NODES}/n1/status", created)
    assert code == 422 and "status.capacity.cpu" in body["message"]


# --- custom resources and their CRD's schema ---------------------------------------------


def group(name: str, spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
        **extra,
    }


async def test_kubectl_refuses_a_pod_group_its_schema_refuses(kubeconfig: Path) -> None:
    assert (await kubectl(kubeconfig, "create", "-f", "-", stdin=json.dumps(POD_GROUP_CRD)))[0] == 0
    bad = group("g", {"minMember": "two", "minResources": {"cpu": "1x"}})
    code, _, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(bad))
    assert code == 1
    assert 'The PodGroup "g" is invalid' in err
    assert (
        'spec.minMember: Invalid value: "string": spec.minMember in body must be of type '
        'integer: "string"'
    ) in err
    assert 'spec.minResources[cpu]: Invalid value: "1x": spec.minResources[cpu] in body' in err
    code, _, err = await kubectl(
        kubeconfig, "apply", "-f", "-", stdin=json.dumps(group("g", {"minMember": 0}))
    )
    assert code == 1
    assert (
        "spec.minMember: Invalid value: 0: spec.minMember in body should be greater than or "
        "equal to 1"
    ) in err
    ok = group("g", {"minMember": 2, "minResources": {"cpu": 2, "memory": "1Gi"}})
    assert (await kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(ok)))[0] == 0
    # An update through apply is checked too.
    worse = group("g", {"minMember": 2, "scheduleTimeoutSeconds": 1.5})
    code, _, err = await kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(worse))
    assert code == 1 and "spec.scheduleTimeoutSeconds" in err


async def test_unknown_fields_are_pruned_and_preserved_where_the_schema_says(http: Http) -> None:
    await http.post(CRDS, POD_GROUP_CRD)
    code, body = await http.post(
        GROUPS, group("g", {"minMember": 1, "minMembers": 5}, extra={"x": 1})
    )
    assert code == 201
    assert body["spec"] == {"minMember": 1} and "extra" not in body

    crd = copy.deepcopy(POD_GROUP_CRD)
    crd["metadata"]["name"] = "things.example.com"
    crd["spec"].update(group="example.com")
    crd["spec"]["names"] = {"kind": "Thing", "plural": "things"}
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["mode"],
                "properties": {
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "name": {"type": "string", "pattern": "^[a-z]+$", "nullable": True},
                    "count": {"type": "integer", "maximum": 3, "default": 1},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                },
            }
        },
    }
    assert (await http.post(CRDS, crd))[0] == 201
    things = "/apis/example.com/v1alpha1/namespaces/default/things"

    def thing(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "example.com/v1alpha1",
            "kind": "Thing",
            "metadata": {"name": name},
            "spec": spec,
        }

    code, body = await http.post(
        things, thing("t", {"mode": "a", "name": None, "free": {"any": {"thing": 1}}, "junk": 1})
    )
    assert code == 201
    assert body["spec"] == {"mode": "a", "name": None, "free": {"any": {"thing": 1}}, "count": 1}

    code, body = await http.post(
        things, thing("u", {"mode": "c", "name": "A1", "count": 4, "tags": ["x", "y", "z"]})
    )
    assert code == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueNotSupported",
            "message": 'Unsupported value: "c": supported values: "a", "b"',
            "field": "spec.mode",
        },
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: \"A1\": spec.name in body should match '^[a-z]+$'",
            "field": "spec.name",
        },
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 4: spec.count in body should be less than or equal to 3",
            "field": "spec.count",
        },
        {
            "reason": "FieldValueTooMany",
            "message": "Too many: 3: must have at most 2 items",
            "field": "spec.tags",
        },
    ]
    code, body = await http.post(things, thing("v", {}))
    assert (
        code == 422
        and body["message"] == 'Thing.example.com "v" is invalid: spec.mode: Required value'
    )
    code, body = await http.post(things, thing("w", {"mode": "a", "tags": ["x", 1]}))
    assert code == 422 and body["details"]["causes"][0]["field"] == "spec.tags[1]"


async def test_store_writes_skip_validation(server: ApiServer) -> None:
    # Tests stand for objects a real server accepted by writing into the store.
    server.store.create("pods", sized_pod("negative", {"cpu": "-2"}))
    server.store.create("pods", sized_pod("unparsable", {"cpu": "lots"}))
    server.store.create("customresourcedefinitions.apiextensions.k8s.io", POD_GROUP_CRD)
    stored = server.store.create(
        "podgroups.scheduling.x-k8s.io", group("g", {"minMember": "two", "junk": 1})
    )
    assert stored["spec"] == {"minMember": "two", "junk": 1}
