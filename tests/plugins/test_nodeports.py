"""NodePorts: host-port conflicts by protocol and address, incremental tracking, hints."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.events import QueueingHint
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code
from troupe.plugins.nodeports import NodePorts
from troupe.plugins.nodeports.node_ports import conflicts, freed_a_wanted_port

from tests.plugins.builders import PodBuilder, make_node, make_pod, table_of
from tests.plugins.fakes import FakeHandle, run_filter

REASON = "node(s) didn't have free ports for the requested pod ports"


def plugin() -> NodePorts:
    return NodePorts(None, FakeHandle())


NODES = [make_node().name(n).capacity(cpu="1", pods=10).obj() for n in ("n1", "n2")]

CASES = [
    pytest.param(
        make_pod().host_port(80), make_pod().name("x").host_port(80), False, id="same port"
    ),
    pytest.param(
        make_pod().host_port(80), make_pod().name("x").host_port(8080), True, id="other port"
    ),
    pytest.param(
        make_pod().host_port(53, "UDP"),
        make_pod().name("x").host_port(53, "TCP"),
        True,
        id="other protocol",
    ),
    pytest.param(
        make_pod().host_port(80, host_ip="10.0.0.1"),
        make_pod().name("x").host_port(80, host_ip="10.0.0.2"),
        True,
        id="same port on another address",
    ),
    pytest.param(
        make_pod().host_port(80, host_ip="10.0.0.1"),
        make_pod().name("x").host_port(80),
        False,
        id="a specific address against a wildcard in use",
    ),
    pytest.param(
        make_pod().host_port(80),
        make_pod().name("x").host_port(80, host_ip="10.0.0.2"),
        False,
        id="a wildcard against a specific address in use",
    ),
]


@pytest.mark.parametrize(("pod", "existing", "fits"), CASES)
def test_filter(pod: PodBuilder, existing: PodBuilder, fits: bool) -> None:
    table = table_of(NODES, pods_on={"n1": [existing.obj()]})
    out = run_filter(plugin(), pod.obj(), table)
    assert out.feasible == ({"n1", "n2"} if fits else {"n2"})
    if not fits:
        assert out.reasons == {"n1": [REASON]}
        assert out.codes == {"n1": {Code.UNSCHEDULABLE}}


def test_a_pod_without_host_ports_skips_the_filter() -> None:
    table = table_of(NODES, pods_on={"n1": [make_pod().host_port(80).obj()]})
    assert run_filter(plugin(), make_pod().req(cpu="1").obj(), table).status.is_skip


def test_ports_follow_pods_added_and_removed_after_the_first_cycle() -> None:
    table = table_of(NODES)
    ports = plugin()
    wants_80 = make_pod().name("w").host_port(80).obj()
    assert run_filter(ports, wants_80, table).feasible == {"n1", "n2"}
    holder = PodInfo.of(make_pod().name("h").host_port(80).obj())
    table.add_pod(holder, "n2")
    assert run_filter(ports, wants_80, table).feasible == {"n1"}
    table.remove_pod(holder, "n2")
    assert run_filter(ports, wants_80, table).feasible == {"n1", "n2"}
    table.add_pod(holder, "n1")
    table.remove_node("n2")  # forgets the change log: the plugin rebuilds
    table.add_node(make_node().name("n3").capacity(cpu="1", pods=10).obj())
    assert run_filter(ports, wants_80, table).feasible == {"n3"}


port_st = st.tuples(
    st.sampled_from(["TCP", "UDP"]),
    st.sampled_from(["0.0.0.0", "10.0.0.1"]),
    st.sampled_from([80, 81]),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(port_st, max_size=3), min_size=1, max_size=5),
    st.lists(port_st, min_size=1, max_size=2),
)
def test_filter_agrees_with_the_pairwise_rule(
    used: list[list[tuple[str, str, int]]], wanted: list[tuple[str, str, int]]
) -> None:
    nodes = [make_node().name(f"n{i}").capacity(cpu="1", pods=10).obj() for i in range(len(used))]
    pods_on = {}
    for i, ports in enumerate(used):
        b = make_pod().name(f"p{i}")
        for proto, ip, port in ports:
            b = b.host_port(port, proto, "" if ip == "0.0.0.0" else ip)
        pods_on[f"n{i}"] = [b.obj()]
    w = make_pod().name("w")
    for proto, ip, port in wanted:
        w = w.host_port(port, proto, ip)
    out = run_filter(plugin(), w.obj(), table_of(nodes, pods_on, capacity=2))
    expected = {
        f"n{i}" for i, ports in enumerate(used) if not any(conflicts(x, ports) for x in wanted)
    }
    assert out.feasible == expected


WANTS_80 = make_pod().name("w").host_port(80).obj()

HINTS = [
    pytest.param(
        make_pod().name("d").node("n1").host_port(80).obj(), QueueingHint.QUEUE, id="freed the port"
    ),
    pytest.param(
        make_pod().name("d").node("n1").host_port(81).obj(),
        QueueingHint.SKIP,
        id="freed another port",
    ),
    pytest.param(make_pod().name("d").node("n1").obj(), QueueingHint.SKIP, id="held no port"),
    pytest.param(
        make_pod().name("d").host_port(80).obj(), QueueingHint.SKIP, id="was never placed"
    ),
    pytest.param(
        make_pod().name("d").nominated("n1").host_port(80).obj(),
        QueueingHint.QUEUE,
        id="was nominated",
    ),
]


@pytest.mark.parametrize(("deleted", "hint"), HINTS)
def test_deleted_pod_hint(deleted: Pod, hint: QueueingHint) -> None:
    assert freed_a_wanted_port(WANTS_80, deleted, None) is hint


def test_events_are_assigned_pod_delete_and_node_add() -> None:
    events = plugin().events_to_register()
    assert [str(e.event) for e in events] == ["AssignedPodDelete", "NodeAdd"]
    assert events[1].hint is None
