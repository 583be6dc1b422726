"""The profile a command schedules with: a KubeSchedulerConfiguration file, or
troupe's default configuration (no file). Plugins are known through the registry
only. Called by ``troupe run``, ``troupe sim``, ``troupe explain`` and ``troupe
replay``."""

from __future__ import annotations

from troupe.api.config import ResolvedConfig, config_document, load_config, load_config_file
from troupe.plugins.registry import catalog, default_registry


def load_profile(path: str | None) -> ResolvedConfig:
    """The configuration in ``path`` (None: troupe's defaults); raises ``ConfigError``
    naming the fields that are wrong."""
    cat = catalog(default_registry())
    return load_config_file(path, cat) if path else load_config(config_document(), cat)
