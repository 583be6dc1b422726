"""Runners of the extension points that follow the choice of a node: Reserve,
Unreserve and Permit end the scheduling cycle (PermitDisruption, KEP-5710, lets a
pod-group cycle evict the victims it planned for); PreBind, Bind and PostBind make the
binding cycle (``troupe.scheduler.cycle.binding_cycle``).

``Framework`` (``troupe.scheduler.framework.runtime``) inherits them and builds the plugin
lists they loop over; they have the shape of every other runner (``runner_support``).
"""

from __future__ import annotations

import time

import structlog

from troupe.api.cycle import CycleState
from troupe.api.framework import (
    BindPlugin,
    DisruptionPlan,
    PermitDisruptionPlugin,
    PermitPlugin,
    PostBindPlugin,
    PreBindPlugin,
    ReservePlugin,
)
from troupe.api.podinfo import PodInfo
from troupe.api.status import SUCCESS, Code, Status
from troupe.scheduler.framework.instrument import (
    RECORD_PLUGIN_METRICS,
    TimedRunners,
    plugin_error,
    plugin_failure,
)
from troupe.scheduler.framework.waiting_pods import WaitingPods

log = structlog.get_logger("troupe.framework")


class CommitRunners(TimedRunners):
    reserve: list[tuple[str, ReservePlugin]]
    permit: list[tuple[str, PermitPlugin]]
    permit_disruption: list[tuple[str, PermitDisruptionPlugin]]
    pre_bind: list[tuple[str, PreBindPlugin]]
    bind: list[tuple[str, BindPlugin]]
    post_bind: list[tuple[str, PostBindPlugin]]

    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        start = time.perf_counter()
        status = SUCCESS
        sampled = state.get(RECORD_PLUGIN_METRICS)
        for name, plugin in self.reserve:
            t = time.perf_counter()
            try:
                st = plugin.reserve(state, pod, node_name)
            except Exception as exc:
                status = plugin_error(name, "reserve", exc)
                break
            if sampled:
                self._plugin_timed("Reserve", name, t, st)
            if not st.is_success:
                status = plugin_failure(name, "reserve", st)
                break
        self._timed("Reserve", start, status)
        return status

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Every reserve plugin, in reverse order; failures cannot stop the others."""
        start = time.perf_counter()
        for _name, plugin in reversed(self.reserve):
            try:
                plugin.unreserve(state, pod, node_name)
            except Exception as exc:  # keep unreserving the rest
                log.error("unreserve failed", plugin=_name, pod=pod.key, error=repr(exc))
        self._timed("Unreserve", start, SUCCESS)

    def run_permit(
        self, state: CycleState, pod: PodInfo, node_name: str, waiting: WaitingPods
    ) -> Status:
        """SUCCESS, a rejection, or WAIT (the pod was added to ``waiting``)."""
        start = time.perf_counter()
        timeouts: dict[str, float] = {}
        status = SUCCESS
        sampled = state.get(RECORD_PLUGIN_METRICS)
        for name, plugin in self.permit:
            t = time.perf_counter()
            try:
                st, timeout = plugin.permit(state, pod, node_name)
            except Exception as exc:
                status = plugin_error(name, "permit", exc)
                break
            if sampled:
                self._plugin_timed("Permit", name, t, st)
            if st.is_wait:
                timeouts[name] = timeout
            elif not st.is_success:
                status = plugin_failure(name, "permit", st)
                break
        if status.is_success and timeouts:
            waiting.add(pod, timeouts)
            status = Status(Code.WAIT)
        self._timed("Permit", start, status)
        return status

    def run_permit_disruption(self, state: CycleState, plan: DisruptionPlan) -> Status:
        """SUCCESS when every plugin lets ``plan``'s victims be evicted (KEP-5710);
        the first refusal otherwise."""
        start = time.perf_counter()
        status = SUCCESS
        sampled = state.get(RECORD_PLUGIN_METRICS)
        for name, plugin in self.permit_disruption:
            t = time.perf_counter()
            try:
                st = plugin.permit_disruption(state, plan)
            except Exception as exc:
                status = plugin_error(name, "permitDisruption", exc)
                break
            if sampled:
                self._plugin_timed("PermitDisruption", name, t, st)
            if not st.is_success:
                status = plugin_failure(name, "permitDisruption", st)
                break
        self._timed("PermitDisruption", start, status)
        return status

    # --- binding cycle -------------------------------------------------------------

    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        start = time.perf_counter()
        status = SUCCESS
        sampled = state.get(RECORD_PLUGIN_METRICS)
        for name, plugin in self.pre_bind:
            t = time.perf_counter()
            try:
                st = await plugin.pre_bind(state, pod, node_name)
            except Exception as exc:
                status = plugin_error(name, "preBind", exc)
                break
            if sampled:
                self._plugin_timed("PreBind", name, t, st)
            if not st.is_success:
                status = plugin_failure(name, "preBind", st)
                break
        self._timed("PreBind", start, status)
        return status

    async def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        start = time.perf_counter()
        status = Status.from_error(RuntimeError("no bind plugin bound the pod"))
        sampled = state.get(RECORD_PLUGIN_METRICS)
        for name, plugin in self.bind:
            t = time.perf_counter()
            try:
                st = await plugin.bind(state, pod, node_name)
            except Exception as exc:
                status = plugin_error(name, "bind", exc)
                break
            if sampled:
                self._plugin_timed("Bind", name, t, st)
            if st.is_skip:
                continue
            status = plugin_failure(name, "bind", st)
            break
        self._timed("Bind", start, status)
        return status

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Every PostBind plugin. The pod is bound already: PostBind is informational
        (upstream), so a plugin that fails is logged and the others still run."""
        start = time.perf_counter()
        sampled = state.get(RECORD_PLUGIN_METRICS)
        for name, plugin in self.post_bind:
            t = time.perf_counter()
            st = SUCCESS
            try:
                plugin.post_bind(state, pod, node_name)
            except Exception as exc:
                st = plugin_error(name, "postBind", exc)
                log.error(
                    "postbind failed", plugin=name, pod=pod.key, node=node_name, error=st.message
                )
            if sampled:
                self._plugin_timed("PostBind", name, t, st)
        self._timed("PostBind", start, SUCCESS)
