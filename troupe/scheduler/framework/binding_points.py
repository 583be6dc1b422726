"""The runners of Reserve to PostBind (Reserve, Unreserve, Permit, PermitDisruption,
PreBind, Bind, PostBind), each through the one runner shape of
``troupe.scheduler.framework.runners``.

``Framework`` (``troupe.scheduler.framework.runtime``) composes one
``BindingRunners`` over its sorted plugins (``PointPlugins``) and its observer; the
pod cycle, the group cycle and the binding cycle call them as ``fwk.binding``.
"""

from __future__ import annotations

from troupe.api.cycle import CycleState
from troupe.api.framework import DisruptionPlan, PermitPlugin, PostBindPlugin, ReservePlugin
from troupe.api.podinfo import PodInfo
from troupe.api.status import SUCCESS, Code, Status
from troupe.scheduler.framework import runners
from troupe.scheduler.framework.instrument import Observer
from troupe.scheduler.framework.points import PointPlugins
from troupe.scheduler.framework.waiting_pods import WaitingPods


class BindingRunners:
    """Reserve to PostBind over one profile's plugins."""

    __slots__ = ("_observe", "_points")

    def __init__(self, points: PointPlugins, observe: Observer) -> None:
        self._points = points
        self._observe = observe

    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return runners.run(
            self._observe,
            runners.RESERVE,
            self._points.reserve,
            state,
            lambda _, p: p.reserve(state, pod, node_name),
        )

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Every reserve plugin, in reverse order; failures cannot stop the others."""

        def unreserve(_: str, plugin: ReservePlugin) -> Status:
            plugin.unreserve(state, pod, node_name)
            return SUCCESS

        runners.run(
            self._observe,
            runners.UNRESERVE,
            self._points.reserve[::-1],
            state,
            unreserve,
            pod=pod.key,
        )

    def run_permit(
        self, state: CycleState, pod: PodInfo, node_name: str, waiting: WaitingPods
    ) -> Status:
        """SUCCESS, a rejection, or WAIT (the pod was added to ``waiting``)."""
        timeouts: dict[str, float] = {}

        def permit(name: str, plugin: PermitPlugin) -> Status:
            status, timeout = plugin.permit(state, pod, node_name)
            if status.is_wait:
                timeouts[name] = timeout
            return status

        def wait_if_asked(status: Status) -> Status:
            if status.is_success and timeouts:
                waiting.add(pod, timeouts)
                return Status(Code.WAIT)
            return status

        return runners.run(
            self._observe, runners.PERMIT, self._points.permit, state, permit, finish=wait_if_asked
        )

    def run_permit_disruption(self, state: CycleState, plan: DisruptionPlan) -> Status:
        """SUCCESS when every plugin lets ``plan``'s victims be evicted (KEP-5710);
        the first refusal otherwise."""
        return runners.run(
            self._observe,
            runners.PERMIT_DISRUPTION,
            self._points.permit_disruption,
            state,
            lambda _, p: p.permit_disruption(state, plan),
        )

    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return await runners.run_async(
            self._observe,
            runners.PRE_BIND,
            self._points.pre_bind,
            state,
            lambda _, p: p.pre_bind(state, pod, node_name),
        )

    async def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return await runners.run_async(
            self._observe,
            runners.BIND,
            self._points.bind,
            state,
            lambda _, p: p.bind(state, pod, node_name),
        )

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Every PostBind plugin. The pod is bound already: PostBind is informational
        (upstream), so a plugin that fails is logged and the others still run."""

        def post_bind(_: str, plugin: PostBindPlugin) -> Status:
            plugin.post_bind(state, pod, node_name)
            return SUCCESS

        runners.run(
            self._observe,
            runners.POST_BIND,
            self._points.post_bind,
            state,
            post_bind,
            pod=pod.key,
            node=node_name,
        )
