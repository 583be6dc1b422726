"""Cache: assume / forget / finish binding, expiry, pods moving, node deletion."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.clock import FakeClock
from troupe.api.podinfo import PodInfo
from troupe.scheduler.cache import Cache

from tests.plugins.builders import make_node, make_pod


def cache_with(*names: str) -> tuple[Cache, FakeClock]:
    clock = FakeClock()
    cache = Cache(clock, assumed_ttl=30)
    for n in names:
        cache.add_node(make_node().name(n).capacity(cpu="4", memory="8Gi", pods=10).obj())
    return cache, clock


def cpu_on(cache: Cache, node: str) -> int:
    return int(cache.table.requested[0, cache.table.index[node]])


def test_an_assumed_pod_takes_capacity_and_forget_returns_it() -> None:
    cache, _ = cache_with("n1")
    info = PodInfo.of(make_pod().name("p").req(cpu="1").obj())
    cache.assume(info, "n1")
    assert cpu_on(cache, "n1") == 1000 and cache.is_assumed("default/p")
    cache.forget(info)
    assert cpu_on(cache, "n1") == 0 and "default/p" not in cache


def test_the_bound_pod_confirms_the_assumption_without_double_counting() -> None:
    cache, clock = cache_with("n1")
    pod = make_pod().name("p").req(cpu="1").obj()
    cache.assume(PodInfo.of(pod), "n1")
    cache.finish_binding(pod.key)
    cache.add_pod(pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": "n1"})}))
    assert cpu_on(cache, "n1") == 1000 and not cache.is_assumed("default/p")
    clock.advance(60)
    assert cache.cleanup_expired() == []
    assert cpu_on(cache, "n1") == 1000


def test_a_confirmed_binding_drops_what_plugins_derived_to_place_the_pod() -> None:
    cache, _ = cache_with("n1")
    pod = make_pod().name("p").req(cpu="1").obj()
    info = PodInfo.of(pod)
    info.extra["NodeResourcesFit"] = object()
    cache.assume(info, "n1")
    cache.finish_binding(pod.key)
    assert info.extra  # still being placed: the binding may yet fail
    cache.add_pod(pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": "n1"})}))
    assert cache.info_of("default/p") is info and info.extra == {}


def test_an_assumed_pod_whose_binding_is_never_confirmed_expires() -> None:
    cache, clock = cache_with("n1")
    info = PodInfo.of(make_pod().name("p").req(cpu="1").obj())
    cache.assume(info, "n1")
    clock.advance(100)
    assert cache.cleanup_expired() == []  # binding not finished: never expires
    cache.finish_binding(info.key)
    clock.advance(29)
    assert cache.cleanup_expired() == []
    clock.advance(2)
    assert cache.cleanup_expired() == ["default/p"]
    assert cpu_on(cache, "n1") == 0


def test_a_pod_bound_elsewhere_than_assumed_moves_to_its_real_node() -> None:
    cache, _ = cache_with("n1", "n2")
    pod = make_pod().name("p").req(cpu="1").obj()
    cache.assume(PodInfo.of(pod), "n1")
    cache.add_pod(pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": "n2"})}))
    assert cpu_on(cache, "n1") == 0 and cpu_on(cache, "n2") == 1000


def test_a_pod_update_that_changes_node_moves_it() -> None:
    cache, _ = cache_with("n1", "n2")
    old = make_pod().name("p").req(cpu="1").node("n1").obj()
    cache.add_pod(old)
    new = old.model_copy(update={"spec": old.spec.model_copy(update={"node_name": "n2"})})
    cache.update_pod(old, new)
    assert cpu_on(cache, "n1") == 0 and cpu_on(cache, "n2") == 1000


def test_deleting_a_node_keeps_its_pods_until_it_returns() -> None:
    cache, _ = cache_with("n1")
    pod = make_pod().name("p").req(cpu="1").node("n1").obj()
    cache.add_pod(pod)
    cache.remove_node("n1")
    assert cache.node_count == 0 and "default/p" in cache
    cache.add_node(make_node().name("n1").capacity(cpu="4", memory="8Gi", pods=10).obj())
    assert cpu_on(cache, "n1") == 1000
    cache.remove_pod(pod)
    assert cpu_on(cache, "n1") == 0


def test_a_pod_on_an_unknown_node_is_accounted_when_the_node_appears() -> None:
    cache, _ = cache_with()
    cache.add_pod(make_pod().name("p").req(cpu="1").node("late").obj())
    cache.add_node(make_node().name("late").capacity(cpu="4", memory="8Gi", pods=10).obj())
    assert cpu_on(cache, "late") == 1000


def test_removing_a_pod_from_a_deleted_node_forgets_it() -> None:
    cache, _ = cache_with("n1")
    pod = make_pod().name("p").req(cpu="1").node("n1").obj()
    cache.add_pod(pod)
    cache.remove_node("n1")
    cache.remove_pod(pod)
    cache.add_node(make_node().name("n1").capacity(cpu="4", memory="8Gi", pods=10).obj())
    assert cpu_on(cache, "n1") == 0 and cache.pod_count == 0


def test_a_status_update_leaves_the_table_alone_and_a_label_change_reaccounts() -> None:
    cache, _ = cache_with("n1")
    pod = make_pod().name("p").req(cpu="1").label("app", "a").node("n1").obj()
    cache.add_pod(pod)
    generation = cache.table.generation
    running = pod.model_copy(update={"status": pod.status.model_copy(update={"phase": "Running"})})
    cache.update_pod(pod, running)
    assert cache.table.generation == generation, "status changes move no accounting"
    assert cpu_on(cache, "n1") == 1000
    relabelled = make_pod().name("p").req(cpu="1").label("app", "b").node("n1").obj()
    cache.update_pod(running, relabelled)
    assert cache.table.generation != generation
    assert cpu_on(cache, "n1") == 1000
    bigger = make_pod().name("p").req(cpu="2").label("app", "b").node("n1").obj()
    cache.update_pod(relabelled, bigger)
    assert cpu_on(cache, "n1") == 2000


# One step on one of three pods: assume it on n1, finish its binding, see it bound to
# n1 or n2, see it deleted, forget it, or let 20 s pass and expire what is due.
Step = tuple[str, int]
STEPS = st.lists(
    st.tuples(
        st.sampled_from(["assume", "finish", "bound n1", "bound n2", "delete", "forget", "wait"]),
        st.integers(0, 2),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(STEPS)
def test_expiry_sees_exactly_the_assumed_pods(steps: list[Step]) -> None:
    cache, clock = cache_with("n1", "n2")
    pods = [make_pod().name(f"p{i}").req(cpu="1").obj() for i in range(3)]
    for what, i in steps:
        pod = pods[i]
        if what == "assume" and pod.key not in cache:
            cache.assume(PodInfo.of(pod), "n1")
        elif what == "finish":
            cache.finish_binding(pod.key)
        elif what.startswith("bound"):
            node = what.split()[1]
            cache.add_pod(
                pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": node})})
            )
        elif what == "delete":
            cache.remove_pod(pod)
        elif what == "forget":
            cache.forget(PodInfo.of(pod))
        elif what == "wait":
            clock.advance(20)
            for key in cache.cleanup_expired():
                assert key not in cache
        assumed = [p.key for p in pods if cache.is_assumed(p.key)]
        assert cache.assumed_count == len(assumed)
    clock.advance(1000)
    expired = cache.cleanup_expired()
    for p in pods:
        assert not (cache.is_assumed(p.key) and not cache.binding_in_flight(p.key))
        assert p.key not in expired or p.key not in cache
