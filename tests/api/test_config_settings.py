"""troupe.api.config: global settings, YAML and files, Go durations."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.config import (
    ConfigError,
    load_config_file,
)
from troupe.api.config_model import parse_go_duration

from tests.api.config_catalog import (
    CATALOG,
    GangArgs,
    config,
    load,
)

# --- global settings -----------------------------------------------------------------


def test_global_defaults_follow_upstream_and_troupe() -> None:
    c = load(config())
    assert (c.parallelism, c.percentage_of_nodes_to_score) == (16, 0)
    assert (c.pod_initial_backoff_seconds, c.pod_max_backoff_seconds) == (1, 10)
    assert c.pod_max_in_unschedulable_pods_duration == 300.0
    assert (c.assumed_pod_ttl_seconds, c.binding_concurrency) == (900, 64)
    assert c.gang_schedule_timeout_seconds == 300
    le = c.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (
        True,
        15.0,
        10.0,
        2.0,
    )
    assert (le.resource_lock, le.resource_name, le.resource_namespace) == (
        "leases",
        "troupe-scheduler",
        "kube-system",
    )
    cc = c.client_connection
    assert (cc.kubeconfig, cc.qps, cc.burst) == ("", 50.0, 100)


@pytest.mark.parametrize(
    ("fields", "floor", "ceiling"),
    [
        pytest.param({}, 64, 512, id="defaults: 64 up to 512"),
        pytest.param({"maxBindingConcurrency": 128}, 64, 128, id="a ceiling of its own"),
        pytest.param({"bindingConcurrency": 1000}, 1000, 1000, id="a floor above 512 is fixed"),
        pytest.param(
            {"bindingConcurrency": 32, "maxBindingConcurrency": 32}, 32, 32, id="fixed slots"
        ),
    ],
)
def test_binding_concurrency_floor_and_ceiling(
    fields: dict[str, int], floor: int, ceiling: int
) -> None:
    c = load(config(**fields))
    assert (c.binding_concurrency, c.max_binding_concurrency) == (floor, ceiling)


def test_yaml_text_is_accepted() -> None:
    text = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaseDuration: 1m30s
  renewDeadline: 45s
  retryPeriod: 500ms
podMaxInUnschedulablePodsDuration: 2m
assumedPodTTLSeconds: 60
profiles:
  - schedulerName: gang
    plugins:
      multiPoint:
        enabled:
          - name: GangPermit
      score:
        enabled:
          - name: NodeResourcesFit
            weight: 3
    pluginConfig:
      - name: GangPermit
        args:
          permitWaitSeconds: 30
"""
    c = load(text)
    le = c.leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (90.0, 45.0, 0.5)
    assert c.pod_max_in_unschedulable_pods_duration == 120.0
    assert c.assumed_pod_ttl_seconds == 60
    profile = c.profiles[0]
    assert profile.scheduler_name == "gang"
    assert profile.names("permit") == ("GangPermit",)
    assert profile.points["score"][0].name == "NodeResourcesFit"
    assert profile.points["score"][0].weight == 3
    assert profile.args["GangPermit"] == GangArgs(permit_wait_seconds=30)


def test_leader_election_checks_are_skipped_when_it_is_off() -> None:
    raw = config(leaderElection={"leaderElect": False, "renewDeadline": "20s"})
    assert load(raw).leader_election.renew_deadline == 20.0


def test_a_config_file_is_read_and_a_missing_one_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    )
    assert load_config_file(path, CATALOG).profiles[0].scheduler_name == "troupe-scheduler"
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read"):
        load_config_file(tmp_path / "missing.yaml", CATALOG)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("15s", 15.0, id="seconds"),
        pytest.param("1m30s", 90.0, id="minutes and seconds"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("1.5h", 5400.0, id="fractional hours"),
        pytest.param("0", 0.0, id="bare zero"),
        pytest.param("-2s", -2.0, id="negative"),
        pytest.param("250us", 0.00025, id="microseconds"),
    ],
)
def test_go_durations_parse_to_seconds(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "s", "1h2", "15 s", "1d"])
def test_malformed_go_durations_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_go_duration(text)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, 48),
    st.integers(0, 59),
    st.integers(0, 59),
    st.integers(0, 999),
)
def test_go_duration_components_add_up(h: int, m: int, s: int, ms: int) -> None:
    text = f"{h}h{m}m{s}s{ms}ms"
    assert parse_go_duration(text) == pytest.approx(h * 3600 + m * 60 + s + ms / 1000)
