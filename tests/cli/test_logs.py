"""``configure_logging``: every line, troupe's and the libraries', is one JSON object
with the same keys (ts, level, logger, msg; err and stacktrace for errors), and the
level flag filters both."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from troupe.scheduler.service.logs import configure_logging


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    text = stream.getvalue()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_library_and_troupe_lines_are_json_objects_with_the_same_keys() -> None:
    out = io.StringIO()
    configure_logging("info", stream=out)
    library = logging.getLogger("aiohttp.server")
    library.warning('client said "hi"\nthen left %s', "early")
    try:
        raise ValueError('bad "value"\nsecond line')
    except ValueError:
        library.exception("Error handling request")
        structlog.get_logger("troupe.test").exception("bind failed", pod="ml/train-0")
    structlog.get_logger("troupe.test").info("bound", pod="ml/train-0", node="node-1")

    warning, library_error, own_error, own_info = lines(out)
    for entry in (warning, library_error, own_error, own_info):
        assert list(entry)[:4] == ["ts", "level", "logger", "msg"]
        assert isinstance(entry["ts"], float)
    assert warning["level"] == "warning"
    assert warning["logger"] == "aiohttp.server"
    assert warning["msg"] == 'client said "hi"\nthen left early'
    assert library_error["level"] == own_error["level"] == "error"
    assert library_error["err"] == own_error["err"] == 'ValueError: bad "value"\nsecond line'
    assert library_error["stacktrace"].startswith("Traceback (most recent call last):")
    assert own_error["stacktrace"] == library_error["stacktrace"]
    assert own_info["logger"] == "troupe.test"
    # kube-scheduler's keys: the pod as klog.KObj renders it, the node by name.
    assert own_info["pod"] == {"name": "train-0", "namespace": "ml"}
    assert own_info["node"] == "node-1"


def test_an_error_keyword_is_logged_as_err() -> None:
    out = io.StringIO()
    configure_logging("info", stream=out)
    structlog.get_logger("troupe.test").error("cannot start", error="403 on /apis")
    (entry,) = lines(out)
    assert entry["err"] == "403 on /apis"
    assert "error" not in entry


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        pytest.param(
            "warning",
            ["troupe warning", "library warning"],
            id="warning drops info of troupe and of libraries",
        ),
        pytest.param(
            "info",
            ["troupe info", "troupe warning", "library info", "library warning"],
            id="info keeps info and above",
        ),
        pytest.param(
            "debug",
            ["troupe debug", "troupe info", "troupe warning", "library info", "library warning"],
            id="debug is troupe's debug only: library debug chatter stays out",
        ),
    ],
)
def test_the_level_filters_every_logger(level: str, expected: list[str]) -> None:
    out = io.StringIO()
    configure_logging(level, stream=out)
    own = structlog.get_logger("troupe.test")
    library = logging.getLogger("kubernetes_asyncio.client.rest")
    own.debug("troupe debug")
    own.info("troupe info")
    own.warning("troupe warning")
    library.debug("library debug")
    library.info("library info")
    library.warning("library warning")
    assert [e["msg"] for e in lines(out)] == expected


def test_console_format_is_one_line_per_event() -> None:
    out = io.StringIO()
    configure_logging("info", fmt="console", stream=out)
    logging.getLogger("asyncio").warning("slow callback")
    structlog.get_logger("troupe.test").info("scheduled", pod="ml/p")
    text = out.getvalue().splitlines()
    assert len(text) == 2
    assert "slow callback" in text[0] and "warning" in text[0]
    assert "scheduled" in text[1] and "pod=ml/p" in text[1]


def test_an_unknown_level_names_the_flag() -> None:
    with pytest.raises(ValueError, match="--log-level: 'verbose' is not one of"):
        configure_logging("verbose")


@pytest.mark.parametrize(("level", "logged"), [("debug", True), ("info", False)])
async def test_a_bound_pod_is_logged_at_debug_only(level: str, logged: bool) -> None:
    """kube-scheduler's "Successfully bound pod to node" (its -v=2 line) is troupe's
    debug line; at the default level it is not even built."""
    from tests.plugins.builders import make_node, make_pod
    from tests.scheduler.harness import Harness

    out = io.StringIO()
    configure_logging(level, stream=out)
    h = Harness().nodes([make_node().name("n1").capacity(cpu="4", memory="8Gi", pods=110).obj()])
    h.pods([make_pod().name("p").uid("p").req(cpu="1").scheduler_name("troupe-scheduler").obj()])
    await h.settle()
    await h.close()
    assert h.client.bindings == [("default/p", "n1")]
    logged_lines = [json.loads(line) for line in out.getvalue().splitlines()]
    bound = [e for e in logged_lines if e["msg"] == "Successfully bound pod to node"]
    assert bool(bound) is logged
    if logged:
        assert bound[0]["pod"] == {"name": "p", "namespace": "default"}
        assert bound[0]["node"] == "n1"
