"""One offline attempt and the fix search (``troupe.whatif.attempt``, ``fixes``) on a
state read from the embedded API server, without the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from troupe.cli.profile import load_profile
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec
from troupe.whatif.attempt import Trial, attempt
from troupe.whatif.errors import WhatIfError
from troupe.whatif.fit import ask_of, capacity
from troupe.whatif.fixes import find_fixes
from troupe.whatif.read import ClusterAddress, read_cluster
from troupe.whatif.state import ClusterState, Target

from tests.integration.conftest import pod
from tests.integration.test_gangs_e2e import gang_member, workload

CONFIG = load_profile(None)


async def state_of(cluster: SimCluster, tmp_path: Path) -> ClusterState:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    return ClusterState(await read_cluster(ClusterAddress(str(kubeconfig))))


async def test_a_v1alpha1_workload_gang_on_a_server_serving_every_version(
    tmp_path: Path,
) -> None:
    """3 nodes of 4 cpu, a Workload gang of 4 members of 3 cpu: 3 fit. The 1.35
    Workload is read although the server also serves newer Workload versions, so the
    attempt is a real one (a reader of the newest version only would copy no group
    object, and the gang would wait at its gate)."""
    async with SimCluster([NodeSpec(count=3, cpu="4", memory="16Gi")]) as cluster:
        kind, obj = workload("train", 4)
        cluster.store.create(kind, obj)
        for i in range(4):
            cluster.store.create("pods", gang_member("workload", "train", i, "3"))
        state = await state_of(cluster, tmp_path)
    target = Target.parse("podgroup", "default/train/workers")
    tried = await attempt(CONFIG, state, target)
    assert not tried.bound and tried.diagnosis is not None
    quorum = tried.diagnosis.quorum
    assert quorum is not None and (quorum.min_count, quorum.fit) == (4, 3)
    assert quorum.min_count_field == "spec.podGroups[workers].policy.gang.minCount"
    ask = ask_of(state, target, tried.diagnosis)
    assert (ask.request, ask.needed) == ({"cpu": 3000}, 4)
    assert capacity(state, ask)["domains"][0]["fit"] == 3

    fixes = await find_fixes(Trial(CONFIG, target), state, tried.diagnosis, ask)
    assert [(f["kind"], f["verified"]) for f in fixes] == [
        ("addNodes", True),
        ("lowerMinCount", True),
    ]
    assert fixes[0]["newNodes"] == [f"{fixes[0]['like']}-like-0"]
    assert fixes[1]["minCount"] == 3 and len(fixes[1]["placement"]) == 3


async def test_a_pod_that_fits_would_bind_and_a_bound_one_has_nothing_to_attempt(
    tmp_path: Path,
) -> None:
    async with SimCluster([NodeSpec(count=1, cpu="4", memory="16Gi")]) as cluster:
        cluster.store.create("pods", pod("small", cpu="1"))
        cluster.store.create("pods", pod("placed", cpu="1", nodeName="node-0"))
        state = await state_of(cluster, tmp_path)
    tried = await attempt(CONFIG, state, Target.parse("pod", "default/small"))
    assert tried.bound and tried.diagnosis is None
    assert tried.nodes == {"default/small": "node-0"}
    with pytest.raises(WhatIfError, match="pod default/placed has no pending pod"):
        await attempt(CONFIG, state, Target.parse("pod", "default/placed"))
