"""Loading a snapshot into the embedded cluster (``troupe.whatif.load``), the snapshot
one attempt is loaded from (``ClusterState.for_attempt``), and the settle loop."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.sim.cluster import SimCluster
from troupe.sim.snapshot_file import Snapshot
from troupe.whatif.errors import LoadError
from troupe.whatif.load import add_objects, load_snapshot
from troupe.whatif.run import settle
from troupe.whatif.state import ClusterState, Target

from tests.integration.conftest import pod

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "uid": "u-n1", "resourceVersion": "42", "labels": {"a": "b"}},
    "status": {"allocatable": {"cpu": "4", "pods": "110"}},
}


def captured(name: str, **spec: Any) -> dict[str, Any]:
    """A pod as a list returns it: server-set metadata included."""
    p = pod(name, **spec)
    p["metadata"].update(uid=f"u-{name}", resourceVersion="7", managedFields=[{"manager": "x"}])
    return p


def snapshot(*pods: dict[str, Any]) -> Snapshot:
    default = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
    return Snapshot(resources={"namespaces": [default], "nodes": [NODE], "pods": list(pods)})


async def test_objects_keep_what_they_hold_and_lose_what_the_server_sets() -> None:
    done = captured("done", nodeName="n1")
    done["status"] = {"phase": "Succeeded"}
    async with SimCluster(heartbeat=None) as cluster:
        # The namespace "default" exists already: no error.
        load_snapshot(cluster, snapshot(captured("bound", nodeName="n1"), captured("new"), done))
        pods = {p["metadata"]["name"]: p for p in cluster.store.list("pods")}
        node = cluster.store.get("nodes", "n1")
    assert set(pods) == {"bound", "new"}  # a finished pod holds nothing: left out
    assert pods["bound"]["spec"]["nodeName"] == "n1"
    assert pods["bound"]["metadata"]["uid"] != "u-bound"
    assert "managedFields" not in pods["bound"]["metadata"]
    assert node["metadata"]["labels"] == {"a": "b"}
    assert node["status"]["allocatable"]["cpu"] == "4"


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        (
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
            "Widget w: the cluster does not serve example.com/v1",
        ),
        (
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "x"}},
            "Secret x/s: not replayed",
        ),
    ],
)
async def test_an_object_that_cannot_be_created_is_named(obj: dict[str, Any], error: str) -> None:
    async with SimCluster(heartbeat=None) as cluster:
        with pytest.raises(LoadError, match=error):
            add_objects(cluster, [obj])


def test_an_attempt_copies_the_bound_pods_and_the_target_s_pending_ones_only() -> None:
    member = captured("m-0", metadata={"labels": {"scheduling.x-k8s.io/pod-group": "g"}})
    member["status"] = {"conditions": [{"type": "PodScheduled", "status": "False"}]}
    state = ClusterState(snapshot(captured("bound", nodeName="n1"), captured("other"), member))
    attempt = state.for_attempt(Target("podgroup", "default", "g"))
    pods = {p["metadata"]["name"]: p for p in attempt.objects("pods")}
    assert set(pods) == {"bound", "m-0"}
    assert "status" not in pods["m-0"]  # pending again, with no verdict of its own
    assert attempt.objects("nodes") == [NODE]
    assert state.pods[2]["status"]  # the state itself is unchanged


async def test_settle_returns_the_first_value_a_step_gives_or_none_at_the_timeout() -> None:
    calls: list[float] = []

    def third(now: float) -> str | None:
        calls.append(now)
        return "done" if len(calls) == 3 else None

    assert await settle(third, timeout=30) == "done"
    assert len(calls) == 3 and calls == sorted(calls)
    never: list[float] = []
    assert await settle(lambda now: never.append(now), timeout=0.05) is None
    assert len(never) > 1  # polled until the deadline, not given up at once
