"""The embedded cluster and daemon fixtures of the integration tests, reused here."""

from tests.integration.conftest import cluster, daemon, start_daemon

__all__ = ["cluster", "daemon", "start_daemon"]
