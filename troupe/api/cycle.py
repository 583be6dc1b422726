"""CycleState: per-scheduling-cycle data that plugins share, with typed keys.

A new CycleState is made for every attempt (pod or group member) by the per-pod
algorithm (``troupe.scheduler.cycle.algorithm``); a plugin writes what it computed in
PreFilter or PreScore and reads it back in Filter or Score.

    FIT_KEY = StateKey[FitState]("NodeResourcesFit")
    state.write(FIT_KEY, FitState(...))
    fit = state.read(FIT_KEY)

The members of one pod-group attempt also share a ``GroupState`` (``state.group``;
None for a pod scheduled on its own), made when the attempt opens and discarded
when it ends, admitted or reverted (upstream's pod-group CycleState,
``SetPodGroupSchedulingCycle``). A plugin keeps there what it did for earlier members
of the same attempt: pending allocations its Reserve made, which its Filter must
count for the next member and its Unreserve takes back.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

T = TypeVar("T")


class StateKey(Generic[T]):
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class _Store:
    """Values typed by their key (``write`` only stores a T under a StateKey[T]), so
    reads need no ``typing.cast``, a function call on every read."""

    __slots__ = ("_data",)

    _data: dict[StateKey[Any], Any]

    def write(self, key: StateKey[T], value: T) -> None:
        self._data[key] = value

    def read(self, key: StateKey[T]) -> T:
        try:
            value: T = self._data[key]
        except KeyError:
            raise KeyError(f"{key.name}: no state written in this cycle") from None
        return value

    def get(self, key: StateKey[T]) -> T | None:
        value: T | None = self._data.get(key)
        return value

    def delete(self, key: StateKey[Any]) -> None:
        self._data.pop(key, None)


class GroupState(_Store):
    """What the members of one pod-group attempt share (``CycleState.group``)."""

    __slots__ = ()

    def __init__(self) -> None:
        self._data = {}

    def clear(self) -> None:
        """The attempt ended: nothing it kept outlives it."""
        self._data.clear()


class CycleState(_Store):
    __slots__ = ("group", "skip_filter_plugins", "skip_score_plugins")

    def __init__(self, group: GroupState | None = None) -> None:
        self._data = {}
        # The group attempt's shared area; None outside a pod-group attempt.
        self.group = group
        # Plugins whose PreFilter/PreScore returned SKIP for this pod.
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()

    def clone(self) -> CycleState:
        # Not ``CycleState()``: making an instance through a Python __init__ is a call
        # from C into a fresh frame, and a batch clones a state for every pod.
        other = object.__new__(CycleState)
        other._data = dict(self._data)
        other.group = self.group
        other.skip_filter_plugins = set(self.skip_filter_plugins)
        other.skip_score_plugins = set(self.skip_score_plugins)
        return other


PODS_TO_ACTIVATE = StateKey[set[str]]("kubernetes.io/pods-to-activate")
"""Pod keys a plugin asks the scheduler to move to the active queue once the cycle
ends (upstream ``framework.PodsToActivateKey``); the scheduler writes an empty set
before every cycle."""
