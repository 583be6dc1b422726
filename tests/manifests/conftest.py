"""``production_run``: one recorded run of ``troupe run``'s code path on the embedded
cluster, shared by the RBAC and alert tests (tests/manifests/production_run.py)."""

from __future__ import annotations

import asyncio

import pytest

from tests.manifests.production_run import ProductionRun, production_run


@pytest.fixture(scope="session")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> ProductionRun:
    # Its own event loop, once per session: the run takes several seconds.
    return asyncio.run(production_run(tmp_path_factory.mktemp("production-run")))
