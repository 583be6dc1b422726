"""structlog configuration: JSON lines (or console) at a chosen level.

``configure_logging`` is called once by the CLI, the benchmarks and the embedded
cluster. Loggers below the level are no-ops (structlog's filtering bound logger),
so per-pod debug lines cost nothing in production. Standard-library loggers
(aiohttp, kubernetes_asyncio) are routed into the same stream.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def configure_logging(
    level: str = "info", fmt: Literal["json", "console"] = "json", stream: object = None
) -> None:
    if level not in LEVELS:
        raise ValueError(f"--log-level: {level!r} is not one of {sorted(LEVELS)}")
    numeric = LEVELS[level]
    out = stream if stream is not None else sys.stderr
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(out),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(out)  # type: ignore[arg-type]
    handler.setFormatter(
        logging.Formatter(
            '{"logger": "%(name)s", "level": "%(levelname)s", "event": "%(message)s"}'
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(numeric, logging.INFO))
