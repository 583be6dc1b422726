"""The binding cycle: WaitOnPermit, PreBind, Bind, PostBind, in owned tasks.

The pod cycle (``troupe.scheduler.cycle.pod_cycle``) hands a pod to ``submit`` after
its scheduling cycle; the group cycle's admission
(``troupe.scheduler.gangs.admission``) calls ``bind_steps`` and ``bound`` for gang
members. A binding that fails unreserves and forgets the pod
and reports the failure; a 409 or 404 from the API server is never retried by the
binding itself. When the informer has reported the pod deleted, re-created under
its name or bound while its binding ran (``pod_superseded``), the pod is not
placed again; otherwise it goes back to the queue with backoff, as upstream's
failure handler requeues a pod its informer still shows unbound (a refusal the
informer explains later makes the queue drop it then). Neither binds a pod twice:
the API server refuses a binding for a pod already bound or of another UID.
A pod waiting at Permit takes a binding slot only once allowed (a rejected one
never takes one).

A binding can be *called off* before it is sent (``call_off``): its node was
deleted (``node_deleted``), or the gang it belongs to was released. A binding
that has not started sees it when it starts; one that waits for the client's
rate limiter sees it right before its request would leave (``CALL_OFF``, read by
the client). It then sends nothing and fails like a refused binding, so the pod
goes back to the queue instead of being bound to a node that is gone. A request
already on the wire is never interrupted (its outcome is the API server's). Every
binding also checks that its node still exists right before Bind.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import structlog

from troupe.api.client import CALL_OFF, ApiError
from troupe.api.clock import Clock
from troupe.api.cycle import CycleState
from troupe.api.events import ASSIGNED_POD_DELETE
from troupe.api.podinfo import PodInfo
from troupe.api.status import SUCCESS, Code, Status
from troupe.api.tasks import BoundedSupervisor, TaskSupervisor
from troupe.queue.entity import QueuedPodInfo
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cache import Cache
from troupe.scheduler.cycle.failure import FailureReporter
from troupe.scheduler.cycle.results import ScheduleResult
from troupe.scheduler.cycle.writer import BackgroundWriter
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.framework.waiting_pods import WaitingPod, WaitingPods
from troupe.scheduler.observe.metrics import SchedulerMetrics
from troupe.scheduler.observe.stats import AttemptStats

log = structlog.get_logger("troupe.scheduler")


Revert = Callable[[Framework, CycleState, PodInfo, str], None]
"""Undo a placement (``PodAlgorithm.revert``)."""


@dataclass(eq=False, kw_only=True)
class BindingCycle:
    cache: Cache
    queue: SchedulingQueue
    waiting: WaitingPods
    bindings: BoundedSupervisor
    background: TaskSupervisor
    writer: BackgroundWriter
    failures: FailureReporter
    stats: AttemptStats
    clock: Clock
    revert: Revert
    metrics: SchedulerMetrics | None = None

    def __post_init__(self) -> None:
        # Whether the per-pod "Successfully bound" line is logged, decided at the
        # level configured when the scheduler is built: asking the logger for every
        # bound pod (a lazy proxy's attribute lookup and a call with five keywords)
        # cost about a microsecond a pod at the default level, which drops it anyway.
        self._log_bound = log.is_enabled_for(logging.DEBUG)
        # Running bindings by node and pod key, until they finish (``call_off``): a
        # token per binding, so a finished one never removes its successor's entry.
        self._tasks: dict[str, dict[str, object]] = {}
        # How many bindings of each pod key are running: ``in_flight`` without a
        # pass over every node's bindings (it is asked once per bound pod).
        self._running: dict[str, int] = {}
        # Pods whose binding was called off, with why; read by the binding itself.
        self._called_off: dict[str, str] = {}
        # Pods the informer reported deleted, re-created or bound while their
        # binding ran (``pod_superseded``), until the binding finishes.
        self._superseded: set[str] = set()

    # --- owned binding tasks ----------------------------------------------------------

    def spawn(self, binding: Coroutine[Any, Any, None], key: str, node: str) -> None:
        """Run ``binding`` in a held binding slot (the caller acquired it); it can be
        called off until it finishes."""
        token = object()
        self._tasks.setdefault(node, {})[key] = token
        self._running[key] = self._running.get(key, 0) + 1
        self.bindings.spawn(self._owned(binding, node, key, token), held=True)

    async def _owned(
        self, binding: Coroutine[Any, Any, None], node: str, key: str, token: object
    ) -> None:
        try:
            await binding
        finally:
            self._finished(node, key, token)

    def _finished(self, node: str, key: str, token: object) -> None:
        running = self._running.pop(key, 1) - 1
        if running:
            self._running[key] = running
        on_node = self._tasks.get(node)
        if on_node is not None and on_node.get(key) is token:
            del on_node[key]
            if not on_node:
                del self._tasks[node]
        self._called_off.pop(key, None)
        self._superseded.discard(key)

    def in_flight(self, key: str) -> bool:
        """Whether a binding task of ``key`` is running (owned here since ``spawn``)."""
        return key in self._running

    def pod_superseded(self, key: str) -> None:
        """The informer reports that the pod of a running binding was deleted (or is
        being deleted), re-created under its name, or bound by anyone: if that binding
        fails, the pod is not placed again (``superseded``)."""
        if self.in_flight(key):
            self._superseded.add(key)

    def superseded(self, key: str) -> bool:
        """Whether the informer reported the pod of this running binding gone or
        bound (``pod_superseded``)."""
        return key in self._superseded

    def call_off(self, key: str, node: str, why: str) -> bool:
        """Call off the binding of ``key`` to ``node`` if it is still running: it
        fails with ``why`` unless its request was already sent."""
        if key not in self._tasks.get(node, {}):
            return False
        self._called_off[key] = why
        return True

    def node_deleted(self, node: str) -> list[str]:
        """Call off every binding to ``node``; returns their pod keys."""
        keys = list(self._tasks.get(node, {}))
        why = f"node {node} was deleted before the pod was bound to it"
        return [key for key in keys if self.call_off(key, node, why)]

    def take_called_off(self, key: str) -> str | None:
        """Why the binding of ``key`` was called off (and forget it), or None."""
        return self._called_off.pop(key, None)

    async def submit(
        self,
        fwk: Framework,
        state: CycleState,
        entity: QueuedPodInfo,
        result: ScheduleResult,
        start: float,
        cycle: int,
    ) -> None:
        """Start the binding cycle of a pod that passed its scheduling cycle: at once
        when a binding slot is free, or once Permit allows it for a waiting pod."""
        info = entity.pod_info
        binding = self.binding_cycle(fwk, state, entity, result, start, cycle)
        waiting = self.waiting.get(info.key)
        if waiting is not None:
            # Waiting at Permit must not hold a binding slot: a gang larger than
            # bindingConcurrency would otherwise never reach its quorum.
            node = result.node
            self.background.spawn(
                self.wait_for_permit(
                    waiting, binding, lambda: self.revert(fwk, state, info, node), node
                ),
                name=f"permit {info.key}",
            )
            return
        await self.bindings.acquire()
        self.spawn(binding, info.key, result.node)

    async def wait_for_permit(
        self,
        waiting: WaitingPod,
        binding: Coroutine[Any, Any, None],
        revert: Callable[[], None],
        node: str,
    ) -> None:
        """Hold the binding cycle until Permit decides, then give it a slot; the
        binding cycle reads the decision itself (WaitOnPermit). A rejected pod makes
        no API call: its binding cycle runs here at once, without a slot, so its
        capacity is released even while every slot is busy."""
        try:
            t = time.perf_counter()
            status = await waiting.wait()
            if self.metrics is not None:
                self.metrics.permit_wait(status.code.name, time.perf_counter() - t)
            if status.is_success:
                await self.bindings.acquire()
        except BaseException:
            binding.close()
            self.waiting.remove(waiting.pod.key)
            revert()
            raise
        if not status.is_success:
            await binding
            return
        self.spawn(binding, waiting.pod.key, node)

    async def binding_cycle(
        self,
        fwk: Framework,
        state: CycleState,
        entity: QueuedPodInfo,
        result: ScheduleResult,
        start: float,
        cycle: int,
    ) -> None:
        info, node = entity.pod_info, result.node
        status = await self.bind_steps(fwk, state, info, node, permit_timed=True)
        if not status.is_success:
            self.binding_failed(fwk, state, entity, node, status, cycle, start)
            return
        self.bound(fwk, state, info, result, start)
        self.stats.scheduled(entity, self.clock.now())

    async def bind_steps(
        self,
        fwk: Framework,
        state: CycleState,
        info: PodInfo,
        node: str,
        *,
        permit_timed: bool = False,
    ) -> Status:
        """WaitOnPermit, PreBind, Bind (a pod scheduled on its own). A cancelled
        binding unreserves and forgets; one called off (``call_off``) before it was
        sent returns that failure for the caller to undo.
        ``permit_timed``: the Permit wait was already measured (``wait_for_permit``)."""
        status = await self.pre_bind_steps(fwk, state, info, node, permit_timed=permit_timed)
        if not status.is_success:
            return status
        return await self.bind_step(fwk, state, info, node)

    async def pre_bind_steps(
        self,
        fwk: Framework,
        state: CycleState,
        info: PodInfo,
        node: str,
        *,
        permit_timed: bool = False,
    ) -> Status:
        """WaitOnPermit and PreBind: what must succeed before Bind (a gang's members
        all pass here before any of them is bound, ``troupe.scheduler.gangs.admission``)."""
        key = info.key
        called_off = self._called_off.get(key)
        if called_off is not None:
            return Status.unschedulable(called_off)
        status = SUCCESS
        with self._sending(fwk, state, info, node):
            waiting = self.waiting.get(key)
            if waiting is not None:
                # WaitOnPermit (already decided when this cycle waited for a slot).
                t = time.perf_counter()
                status = await waiting.wait()
                if self.metrics is not None and not permit_timed:
                    self.metrics.permit_wait(status.code.name, time.perf_counter() - t)
                self.waiting.remove(key)
            if status.is_success:
                # Run "prebind" plugins.
                status = await fwk.binding.run_pre_bind(state, info, node)
        why = self._called_off.get(key)
        return Status.unschedulable(why) if why is not None else status

    async def bind_step(
        self, fwk: Framework, state: CycleState, info: PodInfo, node: str
    ) -> Status:
        """Bind, once PreBind succeeded: unless the node is gone or the binding was
        called off before it was sent."""
        key = info.key
        if node not in self.cache.table.index:
            self._called_off[key] = f"node {node} was deleted before the pod was bound to it"
        why = self._called_off.get(key)
        if why is not None:
            return Status.unschedulable(why)
        with self._sending(fwk, state, info, node):
            # Run "bind" plugins.
            status = await fwk.binding.run_bind(state, info, node)
        why = self._called_off.get(key)
        if why is not None and not status.is_success:
            # Called off before it was sent (or refused for that reason by the client).
            return Status.unschedulable(why)
        return status

    @contextmanager
    def _sending(
        self, fwk: Framework, state: CycleState, info: PodInfo, node: str
    ) -> Iterator[None]:
        """Around a step that may send requests for the pod: the client asks whether
        its binding was called off before sending (after its rate limiter); a step
        cancelled midway unreserves and forgets the pod."""
        key = info.key
        guard = CALL_OFF.set(lambda: self._called_off.get(key))
        try:
            yield
        except BaseException:
            self.revert(fwk, state, info, node)
            raise
        finally:
            CALL_OFF.reset(guard)

    def bound(
        self,
        fwk: Framework,
        state: CycleState,
        info: PodInfo,
        result: ScheduleResult,
        start: float,
    ) -> None:
        """The API server accepted the binding: confirm, PostBind, tell the user."""
        node = result.node
        self.cache.finish_binding(info.key)
        self.stats.attempt("scheduled", fwk.name, time.perf_counter() - start)
        self.stats.member_bound(info.key, self.clock.now())
        # Run "postbind" plugins.
        fwk.binding.run_post_bind(state, info, node)
        if self._log_bound:
            log.debug(
                "Successfully bound pod to node",
                pod=info.key,
                node=node,
                evaluatedNodes=result.evaluated_nodes,
                feasibleNodes=result.feasible_nodes,
            )
        self.writer.scheduled(info.pod, node, fwk.name)

    def binding_failed(
        self,
        fwk: Framework,
        state: CycleState,
        entity: QueuedPodInfo,
        node: str,
        status: Status,
        cycle: int,
        start: float,
    ) -> None:
        """Undo the assumption and report; ``start``: when the attempt's scheduling
        cycle began (``time.perf_counter``), for the attempt's duration as upstream
        measures it (scheduling and binding cycle together)."""
        info = entity.pod_info
        self.revert(fwk, state, info, node)
        self.take_called_off(info.key)
        # The capacity just released may let other pods fit.
        self.queue.on_event(ASSIGNED_POD_DELETE, info.pod, None)
        error = status.error
        if isinstance(error, ApiError) and (error.is_conflict or error.is_not_found):
            log.info(
                "binding rejected by the API server",
                pod=info.key,
                node=node,
                status=error.status,
                reason=error.message,
            )
            self.stats.attempt("error", fwk.name, time.perf_counter() - start)
            if not self.superseded(info.key):
                # Nothing reported explains the refusal (yet): the pod is still ours
                # and unbound as far as we know. Back to the queue with backoff,
                # quietly: if it was bound elsewhere, a PodScheduled=False written now
                # would be wrong, and the informer's report drops it from the queue.
                entity.unschedulable_plugins = set()
                self.queue.add_unschedulable_if_not_present(entity, cycle)
            return
        result = "error" if status.code is Code.ERROR else "unschedulable"
        self.stats.attempt(result, fwk.name, time.perf_counter() - start)
        self.failures.report(fwk, entity, status, None, cycle)
