"""``troupe validate-config FILE``: "ok", or every problem with its path."""

from __future__ import annotations

import sys

from troupe.api.config import ConfigError, load_config_file
from troupe.plugins.registry import catalog, default_registry


def validate_config(path: str) -> int:
    try:
        load_config_file(path, catalog(default_registry()))
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"{path}: {problem}", file=sys.stderr)
        return 1
    print("ok")
    return 0
