"""kubectl reads the events troupe writes (events.k8s.io/v1) through the core v1 API, as
against a real API server: ``kubectl describe pod`` and ``kubectl get events``."""

from __future__ import annotations

from pathlib import Path

from troupe.scheduler.service.daemon import SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import eventually, pod
from tests.sim.conftest import kubectl


async def test_kubectl_describe_pod_shows_the_scheduled_event(
    cluster: SimCluster, daemon: SchedulerDaemon, tmp_path: Path
) -> None:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    cluster.store.create("pods", pod("web"))
    await eventually(
        lambda: bool(cluster.store.list("events.events.k8s.io", field_selector="reason=Scheduled"))
    )
    node = cluster.store.get("pods", "web", "default")["spec"]["nodeName"]
    code, out, err = await kubectl(kubeconfig, "describe", "pod", "web")
    assert (code, err) == (0, "")
    events = out.split("Events:", 1)[1].strip().splitlines()
    assert events[0].split() == ["Type", "Reason", "Age", "From", "Message"]
    kind, reason, _age, source, *message = events[2].split()
    assert (kind, reason, source) == ("Normal", "Scheduled", "troupe-scheduler")
    assert " ".join(message) == f"Successfully assigned default/web to {node}"

    code, out, err = await kubectl(kubeconfig, "get", "events", "--field-selector=reason=Scheduled")
    assert (code, err) == (0, "")
    header, row = out.splitlines()
    assert header.split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert row.split()[1:4] == ["Normal", "Scheduled", "pod/web"]
