"""The one runner shape, for every extension point off the hot path.

PreEnqueue, Reserve, Unreserve, Permit, PermitDisruption, PreBind, Bind, PostBind
and the pod-group points (PodGroupPostFilter, PlacementScore, PlacementFeasible) all
loop over their plugins the same way (upstream
``frameworkImpl.Run*Plugins``): time the point, and on sampled cycles each plugin,
through one observer; call the plugin; turn a raised exception into an ERROR
``running "<Plugin>" <point> plugin: <error>``; stop at the first status the point
does not accept, stamped with the plugin's name and the point. ``Point`` says what
differs:

- ``stops``: which statuses end the loop (default: anything but SUCCESS);
- ``initial``: the result when no plugin decides (Bind: an error, no plugin bound),
  built only then;
- ``contained``: failures are logged and the others still run (Unreserve, PostBind:
  the pod is past the point where a plugin can stop it).

PreBind and Bind are awaited (``run_async``); the rest are synchronous (``run``).
The Filter and Score points are not run here: they work on whole node arrays, and
``troupe.scheduler.framework.runtime`` keeps them specialised.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog

from troupe.api.cycle import CycleState
from troupe.api.status import CODE_NAMES, SUCCESS, Status
from troupe.scheduler.framework.instrument import (
    RECORD_PLUGIN_METRICS,
    Observer,
    plugin_error,
    plugin_failure,
)

log = structlog.get_logger("troupe.framework")

P = TypeVar("P")


def _not_success(status: Status) -> bool:
    return not status.is_success


@dataclass(frozen=True, slots=True)
class Point:
    """How one extension point runs its plugins."""

    metric: str  # the extension_point label, e.g. "Reserve"
    config: str  # the profile's name for it, e.g. "reserve" (in error messages)
    stops: Callable[[Status], bool] = _not_success
    initial: Callable[[], Status] = field(default=lambda: SUCCESS)
    contained: bool = False


def run(
    observe: Observer,
    point: Point,
    plugins: Sequence[tuple[str, P]],
    state: CycleState | None,
    call: Callable[[str, P], Status],
    *,
    finish: Callable[[Status], Status] | None = None,
    **log_fields: Any,
) -> Status:
    """Run ``call(name, plugin)`` for each plugin as ``point`` says; ``state`` None:
    no cycle to sample per-plugin durations on (PreEnqueue). ``finish`` turns the
    loop's result into the point's (Permit: SUCCESS with waiting plugins is WAIT),
    before the point is timed with it."""
    start = time.perf_counter()
    status: Status | None = None  # no plugin decided (yet)
    sampled = state is not None and state.get(RECORD_PLUGIN_METRICS)
    for name, plugin in plugins:
        t = time.perf_counter() if sampled else 0.0
        try:
            st = call(name, plugin)
        except Exception as exc:
            st = plugin_error(name, point.config, exc)
            if not point.contained:
                status = st
                break
        if sampled:
            observe(point.metric, name, CODE_NAMES[st.code], time.perf_counter() - t)
        if point.contained:
            _log_contained(point, name, st, log_fields)
        elif point.stops(st):
            status = plugin_failure(name, point.config, st)
            break
    if status is None:
        status = point.initial()
    if finish is not None:
        status = finish(status)
    observe(point.metric, "", CODE_NAMES[status.code], time.perf_counter() - start)
    return status


async def run_async(
    observe: Observer,
    point: Point,
    plugins: Sequence[tuple[str, P]],
    state: CycleState,
    call: Callable[[str, P], Awaitable[Status]],
) -> Status:
    """``run`` for the points whose plugins are awaited (PreBind, Bind)."""
    start = time.perf_counter()
    status: Status | None = None  # no plugin decided (yet)
    sampled = state.get(RECORD_PLUGIN_METRICS)
    for name, plugin in plugins:
        t = time.perf_counter() if sampled else 0.0
        try:
            st = await call(name, plugin)
        except Exception as exc:
            status = plugin_error(name, point.config, exc)
            break
        if sampled:
            observe(point.metric, name, CODE_NAMES[st.code], time.perf_counter() - t)
        if point.stops(st):
            status = plugin_failure(name, point.config, st)
            break
    if status is None:
        status = point.initial()
    observe(point.metric, "", CODE_NAMES[status.code], time.perf_counter() - start)
    return status


def _log_contained(point: Point, plugin: str, status: Status, fields: dict[str, Any]) -> None:
    if status.is_success:
        return
    log.error(f"{point.config} failed", plugin=plugin, error=status.message, **fields)


def _no_bind() -> Status:
    return Status.from_error(RuntimeError("no bind plugin bound the pod"))


def _wait_or_fail(status: Status) -> bool:
    return not (status.is_success or status.is_wait)


PRE_ENQUEUE = Point("PreEnqueue", "preEnqueue")
RESERVE = Point("Reserve", "reserve")
UNRESERVE = Point("Unreserve", "unreserve", contained=True)
PERMIT = Point("Permit", "permit", stops=_wait_or_fail)
PERMIT_DISRUPTION = Point("PermitDisruption", "permitDisruption")
PRE_BIND = Point("PreBind", "preBind")
# A Bind plugin that skips leaves the pod to the next one; any other answer is final.
BIND = Point("Bind", "bind", stops=lambda st: not st.is_skip, initial=_no_bind)
POST_BIND = Point("PostBind", "postBind", contained=True)
# Upstream runs one PodGroupPostFilter plugin: the first decides, whatever it says.
POD_GROUP_POST_FILTER = Point(
    "PodGroupPostFilter",
    "podGroupPostFilter",
    stops=lambda _: True,
    initial=lambda: Status.unschedulable("no PodGroupPostFilter plugin is enabled"),
)
PLACEMENT_SCORE = Point("PlacementScore", "placementScore")
PLACEMENT_FEASIBLE = Point("PlacementFeasible", "placementFeasible")
