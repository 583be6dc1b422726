"""The operator docs stay true to the code: docs/configuration.md names every profile
field and plugin arg, and the profiles in docs/migrating-from-coscheduling.md load
with troupe's loader and resolve as the text says."""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel
from troupe.api.config import load_config
from troupe.api.config_model import (
    ClientConnectionConfiguration,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    LeaderElectionConfiguration,
)
from troupe.plugins.registry import catalog, default_registry

from tests.manifests.manifest_files import ROOT

CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()
MIGRATING = (ROOT / "docs" / "migrating-from-coscheduling.md").read_text()
CATALOG = catalog(default_registry())


def _aliases(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


FIELDS = [
    (model.__name__, alias)
    for model in (
        KubeSchedulerConfiguration,
        LeaderElectionConfiguration,
        ClientConnectionConfiguration,
        KubeSchedulerProfile,
    )
    for alias in _aliases(model)
] + [
    (f"{name}Args", alias)
    for name, d in sorted(CATALOG.items())
    if d.args_model is not None
    for alias in _aliases(d.args_model)
]


@pytest.mark.parametrize(("owner", "field"), FIELDS, ids=lambda v: v)
def test_configuration_md_documents_the_field(owner: str, field: str) -> None:
    # A nested field may be documented through its sub-fields (`scoringStrategy.type`).
    assert re.search(rf"`{field}[`.]", CONFIGURATION)


@pytest.mark.parametrize(
    ("field", "default"),
    [
        (alias, field.default)
        for model in (KubeSchedulerConfiguration, LeaderElectionConfiguration)
        for alias, field in ((f.alias or n, f) for n, f in model.model_fields.items())
        if isinstance(field.default, int | float | bool)
    ],
    ids=lambda v: str(v),
)
def test_configuration_md_states_the_numeric_default(field: str, default: object) -> None:
    row = next(line for line in CONFIGURATION.splitlines() if line.startswith(f"| `{field}` |"))
    if isinstance(default, bool):
        shown = str(default).lower()
    elif isinstance(default, float):  # a duration, shown as the Go string a file would use
        shown = f"{default / 60:g}m" if default % 60 == 0 else f"{default:g}s"
    else:
        shown = f"{default:g}"
    assert f"`{shown}" in row.split("|")[2]


def _profiles(text: str) -> list[str]:
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    return [b for b in blocks if "kind: KubeSchedulerConfiguration" in b]


def test_the_scheduler_plugins_profile_runs_coscheduling_unchanged() -> None:
    unchanged, switched = _profiles(MIGRATING)
    (profile,) = load_config(unchanged, CATALOG).profiles
    assert profile.names("queueSort") == ("Coscheduling",)
    assert "Coscheduling" in profile.names("permit")
    assert profile.args["Coscheduling"].model_dump()["permit_waiting_time_seconds"] == 10
    (profile,) = load_config(switched, CATALOG).profiles
    assert "Coscheduling" not in profile.enabled
    assert profile.names("queueSort") == ("PrioritySort",)
    assert profile.scheduler_name == "scheduler-plugins-scheduler"
