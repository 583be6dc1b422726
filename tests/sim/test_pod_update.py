"""Pod spec immutability on PUT and PATCH, as upstream's ValidatePodUpdate: what may
change (images, activeDeadlineSeconds down, added tolerations, removed scheduling gates,
a gated pod's node selector additions) and the 422 for everything else."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.sim.conftest import Http, pod

PODS = "/api/v1/namespaces/default/pods"
MERGE = "application/merge-patch+json"
Spec = dict[str, Any]
FORBIDDEN = (
    'Pod "a" is invalid: spec: Forbidden: pod updates may not change fields other than '
    "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
    "negative)\n"
)
TOLERATION = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
GATE = {"name": "troupe.dev/wait"}


def setter(**fields: Any) -> Callable[[Spec], None]:
    return lambda spec: spec.update(fields)


def container(**fields: Any) -> Callable[[Spec], None]:
    return lambda spec: spec["containers"][0].update(fields)


ALLOWED = [
    pytest.param({}, container(image="nginx:1.28"), id="a new image"),
    pytest.param({}, setter(activeDeadlineSeconds=60), id="activeDeadlineSeconds set from nil"),
    pytest.param(
        {"activeDeadlineSeconds": 60},
        setter(activeDeadlineSeconds=30),
        id="activeDeadlineSeconds lowered",
    ),
    pytest.param({}, lambda s: s["tolerations"].append(TOLERATION), id="a toleration added"),
    pytest.param(
        {"tolerations": [{**TOLERATION, "effect": "NoExecute", "tolerationSeconds": 5}]},
        lambda s: s["tolerations"][0].update(tolerationSeconds=60),
        id="a toleration's tolerationSeconds changed",
    ),
    pytest.param(
        {"schedulingGates": [GATE, {"name": "other"}]},
        setter(schedulingGates=[{"name": "other"}]),
        id="a scheduling gate removed",
    ),
    pytest.param(
        {"schedulingGates": [GATE], "nodeSelector": {"zone": "a"}},
        setter(nodeSelector={"zone": "a", "rack": "r1"}),
        id="a gated pod gains a node selector label",
    ),
    pytest.param(
        {"terminationGracePeriodSeconds": -1},
        setter(terminationGracePeriodSeconds=1),
        id="a negative grace period set to 1",
    ),
]

REFUSED = [
    pytest.param({}, setter(nodeName="node-1"), FORBIDDEN + '+ spec.nodeName: "node-1"',
                 id="nodeName on an unbound pod"),
    pytest.param({}, setter(schedulerName="troupe-scheduler"),
                 FORBIDDEN + '- spec.schedulerName: "default-scheduler"\n'
                 '+ spec.schedulerName: "troupe-scheduler"', id="schedulerName"),
    pytest.param({}, container(resources={"requests": {"cpu": "2"}}),
                 FORBIDDEN + '+ spec.containers[0].resources.requests: {"cpu": "2"}',
                 id="container resources"),
    pytest.param({}, setter(terminationGracePeriodSeconds=5),
                 FORBIDDEN + "- spec.terminationGracePeriodSeconds: 30\n"
                 "+ spec.terminationGracePeriodSeconds: 5", id="the grace period"),
    pytest.param({}, setter(nodeSelector={"zone": "a"}),
                 FORBIDDEN + '+ spec.nodeSelector: {"zone": "a"}',
                 id="node selector of a pod that is not gated"),
    pytest.param({}, lambda s: s["containers"].append({"name": "d", "image": "x"}),
                 'Pod "a" is invalid: spec.containers: Forbidden: pod updates may not add or '
                 "remove containers", id="a container added"),
    pytest.param({}, container(image=""),
                 'Pod "a" is invalid: spec.containers[0].image: Required value',
                 id="an empty image"),
    pytest.param({"activeDeadlineSeconds": 30}, setter(activeDeadlineSeconds=60),
                 'Pod "a" is invalid: spec.activeDeadlineSeconds: Invalid value: 60: must be '
                 "less than or equal to previous value", id="activeDeadlineSeconds raised"),
    pytest.param({"tolerations": [TOLERATION]}, setter(tolerations=[]),
                 'Pod "a" is invalid: spec.tolerations: Forbidden: existing toleration can not '
                 "be modified except its tolerationSeconds", id="a toleration removed"),
    pytest.param({}, setter(schedulingGates=[GATE]),
                 'Pod "a" is invalid: spec.schedulingGates[0].name: Forbidden: only deletion is '
                 "allowed, but found new scheduling gate 'troupe.dev/wait'",
                 id="a scheduling gate added"),
    pytest.param({"schedulingGates": [GATE], "nodeSelector": {"zone": "a"}},
                 setter(nodeSelector={"zone": "b"}),
                 'Pod "a" is invalid: spec.nodeSelector: Invalid value: {"zone": "b"}: only '
                 "additions to spec.nodeSelector are allowed (no mutations or deletions)",
                 id="a gated pod's node selector changed"),
]  # fmt: skip


async def created(http: Http, spec: Spec) -> dict[str, Any]:
    code, body = await http.post(PODS, pod("a", **copy.deepcopy(spec)))
    assert code == 201, body
    return body  # type: ignore[no-any-return]


@pytest.mark.parametrize(("spec", "change"), ALLOWED)
async def test_allowed_changes_are_stored(
    http: Http, spec: Spec, change: Callable[[Spec], None]
) -> None:
    current = await created(http, spec)
    change(current["spec"])
    code, body = await http.put(f"{PODS}/a", current)
    assert code == 200, body["message"]
    assert body["spec"] == current["spec"]


@pytest.mark.parametrize(("spec", "change", "message"), REFUSED)
async def test_other_changes_are_refused_with_422(
    http: Http, spec: Spec, change: Callable[[Spec], None], message: str
) -> None:
    current = await created(http, spec)
    change(current["spec"])
    code, body = await http.put(f"{PODS}/a", current)
    assert (code, body["reason"], body["details"]["name"]) == (422, "Invalid", "a")
    assert body["message"] == message
    _, stored = await http.get(f"{PODS}/a")
    assert stored["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]


async def test_patches_are_held_to_the_same_rules(http: Http) -> None:
    await created(http, {})
    code, body = await http.patch(f"{PODS}/a", {"spec": {"nodeName": "node-1"}}, MERGE)
    assert (code, body["reason"]) == (422, "Invalid")
    code, body = await http.patch(
        f"{PODS}/a", {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}},
        "application/strategic-merge-patch+json",
    )  # fmt: skip
    assert (code, body["spec"]["containers"][0]["image"]) == (200, "nginx:2")


async def test_an_update_body_is_defaulted_before_comparing(http: Http) -> None:
    # A client that PUTs the spec it created (no server defaults) changes nothing.
    current = await created(http, {"priorityClassName": "system-node-critical"})
    current["spec"] = pod("a", priorityClassName="system-node-critical")["spec"]
    current["metadata"]["labels"] = {"tier": "fe"}
    code, body = await http.put(f"{PODS}/a", current)
    assert code == 200, body["message"]
    assert body["spec"]["priority"] == 2000001000
    assert body["metadata"]["labels"] == {"tier": "fe"}
