"""PodDisruptionBudget status kept by the embedded disruption controller, as
kube-controller-manager computes it, and evictions consistent with it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.sim.conftest import Http, pod

PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
READY = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


async def start(http: Http, name: str, *, ready: bool = True, app: str = "web") -> None:
    _, created = await http.post(PODS, pod(name, {"app": app}, nodeName="n1"))
    if ready:
        await http.put(f"{PODS}/{name}/status", {**created, "status": READY})


async def budget(http: Http, **spec: Any) -> dict[str, Any]:
    body = {
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }
    assert (await http.post(PDBS, body))[0] == 201
    return await status(http)


async def status(http: Http) -> dict[str, Any]:
    await asyncio.sleep(0)  # the controller recomputes once per loop iteration
    _, current = await http.get(f"{PDBS}/web")
    return current["status"]  # type: ignore[no-any-return]


def counts(s: dict[str, Any]) -> tuple[int, int, int, int]:
    return s["expectedPods"], s["currentHealthy"], s["desiredHealthy"], s["disruptionsAllowed"]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"minAvailable": 2}, (4, 3, 2, 1), id="minAvailable 2"),
        pytest.param({"minAvailable": "50%"}, (4, 3, 2, 1), id="minAvailable 50%"),
        pytest.param({"minAvailable": "60%"}, (4, 3, 3, 0), id="minAvailable 60% rounds up"),
        pytest.param({"maxUnavailable": 1}, (4, 3, 3, 0), id="maxUnavailable 1"),
        pytest.param({"maxUnavailable": "50%"}, (4, 3, 2, 1), id="maxUnavailable 50%"),
        pytest.param({}, (0, 3, 0, 3), id="neither: nothing expected or desired"),
    ],
)
async def test_status_is_computed_from_matching_pods(
    http: Http, spec: dict[str, Any], expected: tuple[int, int, int, int]
) -> None:
    for name in ("a", "b", "c"):
        await start(http, name)
    await start(http, "starting", ready=False)
    await start(http, "other", app="db")
    current = await budget(http, **spec)
    assert counts(current) == expected
    assert current["observedGeneration"] == 1
    (condition,) = current["conditions"]
    allowed = expected[3] > 0
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed",
        "True" if allowed else "False",
        "SufficientPods" if allowed else "InsufficientPods",
    )


async def test_status_follows_pods_as_they_come_and_go(http: Http) -> None:
    assert counts(await budget(http, minAvailable=1)) == (0, 0, 1, 0)
    await start(http, "a")
    assert counts(await status(http)) == (1, 1, 1, 0)
    await start(http, "b")
    assert counts(await status(http)) == (2, 2, 1, 1)
    await http.delete(f"{PODS}/b", {"gracePeriodSeconds": 0})
    assert counts(await status(http)) == (1, 1, 1, 0)


async def test_evictions_use_up_the_budget_the_status_shows(http: Http) -> None:
    for name in ("a", "b", "c"):
        await start(http, name)
    assert counts(await budget(http, maxUnavailable=1)) == (3, 3, 2, 1)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"}}
    assert (await http.post(f"{PODS}/a/eviction", eviction))[0] == 201
    after = await status(http)
    # "a" is terminating (graceful delete): no longer healthy, no disruption left.
    assert counts(after) == (3, 2, 2, 0)
    second = {**eviction, "metadata": {"name": "b"}}
    code, body = await http.post(f"{PODS}/b/eviction", second)
    assert (code, body["details"]["causes"][0]["message"]) == (
        429,
        "The disruption budget web needs 2 healthy pods and has 2 currently",
    )


async def test_a_spec_change_is_observed(http: Http) -> None:
    await start(http, "a")
    await start(http, "b")
    await budget(http, minAvailable=2)
    _, current = await http.get(f"{PDBS}/web")
    current["spec"]["minAvailable"] = 1
    assert (await http.put(f"{PDBS}/web", current))[0] == 200
    updated = await status(http)
    assert (counts(updated), updated["observedGeneration"]) == ((2, 2, 1, 1), 2)
