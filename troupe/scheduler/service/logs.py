"""structlog configuration: JSON lines (or console) at a chosen level, one stream.

``configure_logging`` is called once by the CLI, the benchmarks and the embedded
cluster. troupe's own loggers are structlog filtering bound loggers over standard
library loggers: below the level they are no-ops, so per-pod debug lines cost
nothing in production. Every record, troupe's and those of the libraries it uses
(aiohttp, kubernetes_asyncio, asyncio), is rendered by one structlog
``ProcessorFormatter`` on one handler, so in JSON mode each line on the stream is one
JSON object with the same keys (docs/operations.md, "Log format"):

- ``ts``: seconds since the epoch, a float (as kube-scheduler's JSON logs);
- ``level``: ``debug``, ``info``, ``warning``, ``error`` or ``critical``;
- ``logger``: the logger's name (``troupe.run``, ``aiohttp.access``, ...);
- ``msg``: the message;
- ``err``: the error, for a line that logs one (``error=`` or an exception), and
  ``stacktrace``: the formatted traceback of a logged exception;
- ``pod``: ``{"name", "namespace"}`` as upstream's ``klog.KObj``; other keys as logged
  (``node``, ``evaluatedNodes``, ``feasibleNodes``, ...).
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import MutableMapping
from typing import Any, Literal, TextIO

import structlog

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

# Keys every JSON line starts with, in this order.
_HEAD = ("ts", "level", "logger", "msg")


def _upstream_keys(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Rename structlog's keys to kube-scheduler's (component-base JSON logs) and put
    the common ones first."""
    if "error" in event and "err" not in event:
        event["err"] = event.pop("error")
    exc = _exception(event.pop("exc_info", None))
    if exc is not None:
        event.setdefault("err", "".join(traceback.format_exception_only(exc)).strip())
        event["stacktrace"] = "".join(traceback.format_exception(exc)).rstrip()
    pod = event.get("pod")
    if isinstance(pod, str) and pod.count("/") == 1:
        namespace, name = pod.split("/")
        event["pod"] = {"name": name, "namespace": namespace}
    head = {"ts": event.pop("timestamp", None), "level": event.pop("level", None)}
    head["logger"] = event.pop("logger", None)
    head["msg"] = event.pop("event", None)
    head.update(event)
    return head


def _exception(exc_info: object) -> BaseException | None:
    """The exception of a record's ``exc_info`` (True: the one being handled)."""
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple):
        return exc_info[1] if len(exc_info) == 3 else None
    return sys.exc_info()[1] if exc_info else None


class _LibraryLevel(logging.Filter):
    """Lines of other libraries (aiohttp, kubernetes_asyncio, asyncio) are kept from
    ``info`` up even with ``--log-level debug``: their debug output is request
    chatter, not troupe's story. troupe's own lines were filtered by structlog."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return isinstance(record.msg, dict) or record.levelno >= self.level


def configure_logging(
    level: str = "info",
    fmt: Literal["json", "console"] = "json",
    stream: TextIO | None = None,
) -> None:
    if level not in LEVELS:
        raise ValueError(f"--log-level: {level!r} is not one of {sorted(LEVELS)}")
    numeric = LEVELS[level]
    out = stream if stream is not None else sys.stderr
    rendering: list[structlog.types.Processor] = (
        [
            structlog.processors.TimeStamper(fmt=None, utc=True),
            _upstream_keys,
            structlog.processors.JSONRenderer(),
        ]
        if fmt == "json"
        else [
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.dev.ConsoleRenderer(colors=False),
        ]
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        processors=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *rendering,
        ],
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    handler.addFilter(_LibraryLevel(max(numeric, logging.INFO)))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
