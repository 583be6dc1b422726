"""Status and Code: the result of every plugin call (upstream ``framework.Status``).

Every extension-point runner in ``troupe.scheduler.framework.runtime`` returns a Status; a
success is ``Status()`` (the ``SUCCESS`` constant), never ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum


class Code(IntEnum):
    """Upstream status codes, same order and meaning."""

    SUCCESS = 0
    ERROR = 1
    # The pod does not fit now; preemption may help.
    UNSCHEDULABLE = 2
    # The pod does not fit and preemption cannot help (e.g. node affinity).
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    # Permit: the pod waits on a barrier before binding.
    WAIT = 4
    # PreFilter/PreScore: this plugin has nothing to do for the pod.
    SKIP = 5
    # The pod waits for something outside scheduling; retried without backoff.
    PENDING = 6


CODE_NAMES: tuple[str, ...] = tuple(code.name for code in Code)
"""``CODE_NAMES[status.code]`` is ``status.code.name`` without the enum's Python-level
property: the runners label a metric with it at every extension point."""

_REJECTED = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    error: BaseException | None = None
    # The extension point of the plugin that produced it ("Filter", "Permit", ...),
    # stamped by the runner with ``plugin``.
    point: str = ""
    # Attributes, not properties: read several times for every pod scheduled, and a
    # property is a Python call each time.
    is_success: bool = field(init=False, repr=False, compare=False)
    is_skip: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_success", self.code is Code.SUCCESS)
        object.__setattr__(self, "is_skip", self.code is Code.SKIP)

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE, reasons, plugin)

    @classmethod
    def unresolvable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin)

    @classmethod
    def from_error(cls, error: BaseException, plugin: str = "") -> Status:
        return cls(Code.ERROR, (str(error),), plugin, error)

    @classmethod
    def with_code(cls, code: Code, *reasons: str) -> Status:
        return cls(code, reasons)

    @property
    def is_wait(self) -> bool:
        return self.code is Code.WAIT

    @property
    def is_rejected(self) -> bool:
        """Unschedulable, unresolvable or pending: the pod cannot go on now."""
        return self.code in _REJECTED

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def stamped(self, plugin: str, point: str = "") -> Status:
        """This status with the plugin (and extension point) that produced it
        recorded (the first one wins)."""
        if self.plugin or self.is_success:
            return self
        return replace(self, plugin=plugin, point=point)

    def wrapped(self, prefix: str) -> Status:
        """An error status whose message names where it came from, e.g.
        ``running "NodeResourcesFit" filter plugin: ...``."""
        return replace(self, reasons=(f"{prefix}: {self.message}",))


SUCCESS = Status()
SKIP = Status(Code.SKIP)
