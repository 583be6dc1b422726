"""The default ``troupe sim`` scenario played in process, as ``troupe sim`` plays it
(SimCluster, the scheduler daemon over HTTP, ScenarioRunner), telling its gang story:
the small gangs are scheduled, the second big gang waits holding nothing while the
first runs and is then placed whole, the gang larger than the cluster stays pending
with the scheduler's reason, the rack-constrained gang lands in one rack (and its row
says which), and no gang is ever left partly bound."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from troupe.api.config import config_document, load_config
from troupe.cli.render import render_summary
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import RACK_LABEL
from troupe.sim.runner import GangOutcome, GangRow, ScenarioRunner, node_spec
from troupe.sim.scenario import DEFAULT_SCENARIO, GangStep, Scenario, load_scenario


@dataclass(frozen=True)
class Roles:
    """Which gang of the default scenario plays which part, from its GPU arithmetic."""

    fitting: list[GangStep]  # no GPUs: scheduled at once
    first: GangStep  # holds most of the GPUs for runSeconds
    waiting: GangStep  # needs more GPUs than the first leaves free
    impossible: GangStep  # asks for more GPUs than the cluster has

    @classmethod
    def of(cls, scenario: Scenario) -> Roles:
        gpus = sum(n.count * n.gpus for n in scenario.nodes)
        gangs = [s.gang for s in sorted(scenario.steps, key=lambda s: s.at) if s.gang]
        (impossible,) = [g for g in gangs if g.size * g.gpus > gpus]
        first, waiting = [g for g in gangs if gpus / 2 < g.size * g.gpus <= gpus]
        fitting = [g for g in gangs if not g.gpus]
        assert first.run_seconds is not None and fitting
        return cls(fitting, first, waiting, impossible)


class GangBindings:
    """Every binding and completion of a gang member, as the store commits it."""

    def __init__(self, cluster: SimCluster, roles: Roles) -> None:
        self.gang_of = {
            f"{g.name}-{i}": g.name
            for g in [*roles.fitting, roles.first, roles.waiting, roles.impossible]
            for i in range(g.size)
        }
        self.bound: dict[str, list[str]] = {}
        self.node: dict[str, str] = {}
        self.succeeded: dict[str, set[str]] = {}
        # For each binding of a waiting-gang member: members of the first gang not
        # yet finished at that moment.
        self.first_running_at_waiting_bindings: list[int] = []
        self.roles = roles
        self._seen: set[str] = set()
        self.stop = cluster.store.listen("pods", self._on)

    def _on(self, type_: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        gang = self.gang_of.get(name)
        if gang is None or type_ == "DELETED":
            return
        if obj["spec"].get("nodeName") and name not in self._seen:
            self._seen.add(name)
            self.bound.setdefault(gang, []).append(name)
            self.node[name] = obj["spec"]["nodeName"]
            if gang == self.roles.waiting.name:
                finished = len(self.succeeded.get(self.roles.first.name, set()))
                self.first_running_at_waiting_bindings.append(self.roles.first.size - finished)
        if obj.get("status", {}).get("phase") == "Succeeded":
            self.succeeded.setdefault(gang, set()).add(name)


async def test_the_default_scenario_tells_the_gang_story(tmp_path: Path) -> None:
    scenario = load_scenario(DEFAULT_SCENARIO, origin="default scenario")
    roles = Roles.of(scenario)
    async with SimCluster([node_spec(g) for g in scenario.nodes]) as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        config = load_config(config_document(), catalog(default_registry()))
        daemon = SchedulerDaemon(config, Connection(kubeconfig=str(kubeconfig)), seed=1)
        await daemon.start()
        watch = GangBindings(cluster, roles)
        rack_of = {
            n["metadata"]["name"]: n["metadata"]["labels"][RACK_LABEL]
            for n in cluster.store.list("nodes")
        }
        try:
            summary = await ScenarioRunner(cluster, scenario).run()
        finally:
            watch.stop()
            await daemon.stop(grace=2)
    rows: dict[str, GangRow] = {g.name: g for g in summary.gangs}
    assert not summary.timed_out

    # No gang ends partly bound, and every gang that got nodes got them in one go:
    # its bindings are one burst, not pieces across retries (backoff is >= 1 s).
    assert [g.name for g in summary.gangs if g.outcome is GangOutcome.PARTIAL] == []
    for g in summary.gangs:
        if g.bound:
            assert g.first_bound is not None and g.last_bound is not None
            assert g.last_bound - g.first_bound < 1.0, f"{g.name} bound in pieces"

    for fitting in roles.fitting:
        row = rows[fitting.name]
        assert row.bound == fitting.size, row
        assert row.outcome in (GangOutcome.SCHEDULED, GangOutcome.COMPLETED), row

    first, waiting = rows[roles.first.name], rows[roles.waiting.name]
    assert first.outcome is GangOutcome.COMPLETED, first
    assert waiting.outcome is GangOutcome.SCHEDULED and waiting.bound == waiting.size, waiting
    # It waited holding nothing: none of its pods got a node while the first gang ran.
    assert watch.first_running_at_waiting_bindings == [0] * waiting.size
    assert first.finished is not None and waiting.first_bound is not None
    assert waiting.first_bound >= first.finished

    impossible = rows[roles.impossible.name]
    assert impossible.outcome is GangOutcome.PENDING and impossible.bound == 0, impossible
    assert impossible.reason in ("CoschedulingNotMeetMinMember", "Unschedulable"), impossible
    assert impossible.message.startswith(f"gang default/{impossible.name}: "), impossible
    assert "required pods fit" in impossible.message
    assert roles.impossible.name not in watch.bound

    # The CompositePodGroup: its PodGroups are placed together, each at its quorum.
    (composite,) = [s.composite for s in scenario.steps if s.composite is not None]
    for leaf in composite.leaves():
        row = rows[leaf.name]
        assert row.api == "podgroup/v1beta1" and row.bound >= leaf.quorum, row
    starts = [rows[leaf.name].first_bound for leaf in composite.leaves()]
    assert all(t is not None for t in starts)
    bound_at = [t for t in starts if t is not None]
    assert max(bound_at) - min(bound_at) < 1.0, "the composite's groups bound apart"

    # The topology gang: every member in one rack, as the nodes' labels say, and the
    # row names that rack.
    (ranged,) = [g for g in roles.fitting if g.topology is not None]
    assert ranged.topology_keys == (RACK_LABEL,)
    racks = {rack_of[watch.node[n]] for n in watch.bound[ranged.name]}
    assert len(watch.bound[ranged.name]) == ranged.size and len(racks) == 1, racks
    (rack,) = racks
    assert rows[ranged.name].domains == ((RACK_LABEL, (rack,)),)
    assert all(not rows[g.name].domains for g in roles.fitting if g is not ranged)

    text = render_summary(summary)
    assert "Gangs:" in text and f"  {impossible.name}  gang default/" in text
    assert any(
        line.startswith(f"{ranged.name} ") and line.endswith(f"  {RACK_LABEL}={rack}")
        for line in text.splitlines()
    ), text
