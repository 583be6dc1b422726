"""The gang PreBind barrier end to end: a profile with an extra plugin whose PreBind
fails once for one member. Through the embedded API server, nothing of the gang is
bound while that PreBind fails, every member is unreserved, and the gang is retried
and bound, each member once, when PreBind succeeds."""

from __future__ import annotations

from pathlib import Path

from troupe.api.config import config_document, load_config
from troupe.api.cycle import CycleState
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.plugins.registry import PluginSpec, catalog, default_registry
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually
from tests.integration.test_gangs_e2e import coscheduling, gang_member


class FlakyVolume:
    """A volume plugin stand-in: PreBind of ``train-1`` fails the first time."""

    name = "FlakyVolume"

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.failures_left = 1

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.log.append(("reserve", pod.key))
        return Status()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.log.append(("unreserve", pod.key))

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        if pod.key == "default/train-1" and self.failures_left:
            self.failures_left -= 1
            self.log.append(("prebind-failed", pod.key))
            return Status.unschedulable("volume attach timed out")
        self.log.append(("prebind", pod.key))
        return Status()

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.log.append(("bind", pod.key))
        return Status(Code.SKIP)  # DefaultBinder binds

    def steps(self, step: str) -> list[str]:
        return [key for s, key in self.log if s == step]


async def test_a_failed_prebind_binds_nothing_unreserves_all_and_the_gang_binds_on_retry(
    cluster: SimCluster, tmp_path: Path
) -> None:
    plugin = FlakyVolume()
    registry = default_registry()
    registry.register(PluginSpec(plugin.name, lambda a, h: plugin, None, FlakyVolume))
    profile = {
        "plugins": {
            "reserve": {"enabled": [{"name": "FlakyVolume"}]},
            "preBind": {"enabled": [{"name": "FlakyVolume"}]},
            "bind": {
                "enabled": [{"name": "FlakyVolume"}, {"name": "DefaultBinder"}],
                "disabled": [{"name": "*"}],
            },
        }
    }
    config = load_config(config_document(profiles=[profile]), catalog(registry))
    daemon = SchedulerDaemon(
        config,
        Connection(kubeconfig=str(cluster.write_kubeconfig(tmp_path / "kubeconfig"))),
        registry=registry,
        seed=1,
        sync_timeout=10,
    )
    await daemon.start()
    try:
        bindings = Bindings(cluster)
        kind, obj = coscheduling("train", 3)
        cluster.store.create(kind, obj)
        for i in range(3):
            cluster.store.create("pods", gang_member("coscheduling", "train", i, "1"))
        await eventually(lambda: len(bindings.node) == 3, timeout=30, what="the gang bound")
        # The first attempt: train-1's PreBind failed, no member was bound, and every
        # member was unreserved (the last placed first) before anything bound.
        first_bind = plugin.log.index(("bind", plugin.steps("bind")[0]))
        first_undo = plugin.log.index(("unreserve", plugin.steps("unreserve")[0]))
        assert plugin.log.index(("prebind-failed", "default/train-1")) < first_undo
        reserved = [key for step, key in plugin.log[:first_undo] if step == "reserve"]
        undone = plugin.steps("unreserve")
        assert undone == reserved[::-1] and len(undone) == 3
        assert max(i for i, (step, _) in enumerate(plugin.log) if step == "unreserve") < first_bind
        # The retry bound every member, each once.
        assert sorted(plugin.steps("bind")) == [f"default/train-{i}" for i in range(3)]
        assert bindings.twice() == []
        bindings.stop()
    finally:
        await daemon.stop(grace=1)
