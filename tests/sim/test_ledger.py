"""The write ledger: accepted writes with their User-Agent and the Lease holder when
they arrived and when they were answered; accepted bindings by pod UID and node."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from troupe.sim.apiserver import ApiServer

from tests.sim.conftest import Http, pod

PODS = "/api/v1/namespaces/default/pods"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"


def lease(holder: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "sched", "namespace": "kube-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }


def hand_lease_to(server: ApiServer, holder: str) -> None:
    current = server.store.get("leases.coordination.k8s.io", "sched", "kube-system")
    current["spec"]["holderIdentity"] = holder
    server.store.update("leases.coordination.k8s.io", current)


async def post_as(server: ApiServer, agent: str, path: str, body: dict[str, Any]) -> int:
    async with (
        aiohttp.ClientSession(headers={"User-Agent": agent}) as session,
        session.post(server.url + path, json=body) as response,
    ):
        return response.status


def binding(name: str, node: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}}


async def test_accepted_writes_carry_the_agent_and_the_holder_reads_and_refusals_do_not(
    http: Http, server: ApiServer
) -> None:
    server.store.create("leases.coordination.k8s.io", lease("a_1"))
    ledger = server.record_writes("kube-system", "sched")
    assert await post_as(server, "troupe (a_1)", PODS, pod("p")) == 201
    assert (await http.get(PODS))[0] == 200
    assert await post_as(server, "troupe (a_1)", PODS, pod("p")) == 409
    hand_lease_to(server, "b_2")
    assert await post_as(server, "troupe (a_1)", f"{PODS}/p/binding", binding("p", "n1")) == 201
    assert [(w.method, w.path, w.user_agent, w.holder_at_arrival) for w in ledger.writes] == [
        ("POST", PODS, "troupe (a_1)", "a_1"),
        ("POST", f"{PODS}/p/binding", "troupe (a_1)", "b_2"),
    ]


async def test_a_write_delayed_past_a_lease_handover_shows_both_holders(
    server: ApiServer,
) -> None:
    server.store.create("leases.coordination.k8s.io", lease("a_1"))
    ledger = server.record_writes("kube-system", "sched")
    server.faults.delay("POST", "/pods$", 0.3)
    sent = asyncio.ensure_future(post_as(server, "troupe (a_1)", PODS, pod("slow")))
    await asyncio.sleep(0.1)
    hand_lease_to(server, "b_2")
    assert await sent == 201
    [write] = ledger.writes
    assert (write.holder_at_arrival, write.holder_at_commit) == ("a_1", "b_2")


async def test_bindings_are_recorded_by_uid_with_whether_the_node_existed(
    http: Http, server: ApiServer
) -> None:
    ledger = server.record_writes("kube-system", "sched")
    server.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    uids = []
    for name in ("p", "q"):
        uids.append(server.store.create("pods", pod(name))["metadata"]["uid"])
    assert (await http.post(f"{PODS}/p/binding", binding("p", "n1")))[0] == 201
    assert (await http.post(f"{PODS}/q/binding", binding("q", "gone")))[0] == 201
    assert (await http.post(f"{PODS}/q/binding", binding("q", "n1")))[0] == 409
    assert [(b.name, b.uid, b.node, b.node_existed) for b in ledger.bindings] == [
        ("p", uids[0], "n1", True),
        ("q", uids[1], "gone", False),
    ]
    assert not any(w.holder_at_arrival or w.holder_at_commit for w in ledger.writes)
