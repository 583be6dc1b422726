"""What every extension-point runner shares: timing through one observer, and one
way to report a failing plugin.

``troupe.scheduler.framework.runners`` (the one runner shape, for the points off
the hot path) and ``troupe.scheduler.framework.runtime`` (the specialised
PreFilter..Score runners) build on it.
"""

from __future__ import annotations

from collections.abc import Callable

from troupe.api.cycle import StateKey
from troupe.api.status import Code, Status

Observer = Callable[[str, str, str, float], None]
"""(extension point, plugin or "", status code name, seconds) -> None."""


RECORD_PLUGIN_METRICS = StateKey[bool]("troupe/record-plugin-metrics")
"""Set to True by the scheduler on the cycles whose per-plugin durations are recorded
(upstream ``CycleState.SetRecordPluginMetrics``, 10% of cycles); unsampled cycles
pay one dict lookup per extension point."""


def no_observer(point: str, plugin: str, code: str, seconds: float) -> None:
    return None


def plugin_error(plugin: str, point: str, exc: BaseException | str) -> Status:
    """A raised exception (or an error message) of ``plugin`` as its runner reports it."""
    status = Status.from_error(exc if isinstance(exc, BaseException) else RuntimeError(exc))
    return plugin_failure(plugin, point, status)


def plugin_failure(plugin: str, point: str, status: Status) -> Status:
    """A non-success Status returned by ``plugin``, as its runner reports it: stamped
    with the plugin and the extension point (``point`` as the profile names it,
    ``preFilter``; the Status carries it as the metrics do, ``PreFilter``), and an
    ERROR wrapped with where it came from, exactly like a raised exception (upstream
    ``running "X" <point> plugin: <error>``)."""
    if status.code is Code.ERROR:
        status = status.wrapped(f'running "{plugin}" {point} plugin')
    return status.stamped(plugin, point[:1].upper() + point[1:])
