"""Group status troupe writes: the scheduler-plugins PodGroup ``status``, the
v1alpha2 PodGroup ``PodGroupScheduled`` and the v1beta1 ``PodGroupInitiallyScheduled``
condition.

- ``coscheduling_status(pg, pods, now)``: the PodGroup status as a pure function of
  the object, its member pods and the time, following scheduler-plugins'
  ``PodGroupReconciler`` phase machine (pkg/controllers/podgroup_controller.go);
- ``PodGroupStatusController``: fed by the pod and PodGroup informer handlers, it
  writes that status as a merge patch of ``status`` whenever it changed, coalesced per
  group and at most one write per group per ``min_interval`` (the latest state wins),
  from tasks owned by a ``TaskSupervisor``. It replaces the scheduler-plugins
  controller, whose users report stale status (scheduler-plugins #166, #386, #446, #578);
- ``pod_group_scheduled_condition``: the v1alpha2 PodGroup conditions after a
  scheduling outcome (KEP-5832 "PodGroup Status Lifecycle"), never regressing a True
  ``PodGroupScheduled`` to False (as upstream's 1.36 pod-group cycle).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import structlog

from troupe.api.client import ApiError, WriteFenced
from troupe.api.clock import Clock
from troupe.api.gangapi import (
    PHASE_FAILED,
    PHASE_FINISHED,
    PHASE_PENDING,
    PHASE_RUNNING,
    PHASE_SCHEDULING,
    POD_GROUP_INITIALLY_SCHEDULED,
    POD_GROUP_SCHEDULED,
    Condition,
    CoschedulingPodGroup,
    CoschedulingPodGroupStatus,
    ScheduledOutcome,
    parse_time,
)
from troupe.api.gangapi_kinds import PLURAL_OF
from troupe.api.gangs import POD_GROUP_LABEL, GangApi, group_ref_of
from troupe.api.objects import Pod, PodKey
from troupe.api.tasks import TaskSupervisor
from troupe.kube.client import custom_object_path, rfc3339

log = structlog.get_logger("troupe.gangs.status")

StatusPatch = Callable[[str, Mapping[str, Any]], Awaitable[object]]
"""``KubeClient.merge_patch``: a JSON merge patch of an object path."""

_TERMINAL: Final = (PHASE_FINISHED, PHASE_FAILED)
# The phase machine moves at most ""→Pending→Scheduling→Running→Failed/Finished.
_MAX_STEPS: Final = 6


def status_path(api: GangApi, namespace: str, name: str, api_version: str = "") -> str:
    """The ``status`` subresource of a group object (at ``api_version``, default the
    API's own)."""
    group, version = (api_version or api.value).split("/")
    return custom_object_path(
        group, version, PLURAL_OF[api], name, namespace=namespace, subresource="status"
    )


# --- scheduler-plugins PodGroup status ---------------------------------------------------


def _counts(pods: Sequence[Pod]) -> tuple[int, int, int]:
    running = succeeded = failed = 0
    for pod in pods:
        phase = pod.status.phase
        if phase == "Running":
            running += 1
        elif phase == "Succeeded":
            succeeded += 1
        elif phase == "Failed":
            failed += 1
    return running, succeeded, failed


def _occupied_by(pods: Sequence[Pod]) -> str:
    """Upstream ``fillOccupiedObj``: every owner of one member as ``<ns>/<owner>``,
    sorted and comma-joined; "" when it has none. Upstream takes the first pod of an
    unordered list; troupe takes the oldest member so the answer is stable."""
    first = min(pods, key=lambda p: (parse_time(p.metadata.creation_timestamp), p.metadata.name))
    refs = sorted(f"{first.metadata.namespace}/{o.name}" for o in first.metadata.owner_references)
    return ",".join(refs)


def _step(
    status: CoschedulingPodGroupStatus, min_member: int, pods: Sequence[Pod]
) -> CoschedulingPodGroupStatus:
    """One reconcile of upstream's ``PodGroupReconciler`` (counts aside)."""
    phase = status.phase
    if phase == "":
        return status.model_copy(update={"phase": PHASE_PENDING})
    if phase == PHASE_PENDING:
        if len(pods) < min_member:
            return status
        update: dict[str, Any] = {"phase": PHASE_SCHEDULING}
        occupied = _occupied_by(pods) if pods else ""
        if occupied:
            update["occupied_by"] = occupied
        return status.model_copy(update=update)
    # Scheduling, Running, Unknown: upstream's default branch.
    if len(pods) < min_member:
        return status.model_copy(update={"phase": PHASE_PENDING})
    active = status.running + status.succeeded
    new_phase = PHASE_RUNNING if active >= min_member else PHASE_SCHEDULING
    if status.failed and status.failed + active >= min_member:
        new_phase = PHASE_FAILED
    if status.succeeded >= min_member:
        new_phase = PHASE_FINISHED
    return status.model_copy(update={"phase": new_phase})


def coscheduling_status(
    pg: CoschedulingPodGroup, pods: Iterable[Pod], now: float
) -> CoschedulingPodGroupStatus:
    """The status ``pg`` should have, given its member pods (label
    ``scheduling.x-k8s.io/pod-group`` in its namespace) and the wall time ``now``.

    Upstream reconciles one phase step per event and re-reconciles after its own
    write; this runs the steps to their fixed point, which is where upstream settles.
    Deviations: the counts follow the pods in every non-terminal phase (upstream
    leaves them stale while Pending), ``scheduleStartTime`` is set the first time the
    group leaves Pending and kept, and a group with ``minMember < 1`` (invalid, see
    ``GroupProblem``) only gets its counts. Finished and Failed are final, as upstream.
    """
    status = pg.status
    if status.phase in _TERMINAL:
        return status
    members = list(pods)
    running, succeeded, failed = _counts(members)
    status = status.model_copy(
        update={"running": running, "succeeded": succeeded, "failed": failed}
    )
    min_member = pg.spec.min_member
    if min_member < 1:
        return status.model_copy(update={"phase": status.phase or PHASE_PENDING})
    for _ in range(_MAX_STEPS):
        stepped = _step(status, min_member, members)
        if stepped == status:
            break
        status = stepped
    if status.phase not in ("", PHASE_PENDING) and not status.schedule_start_time:
        status = status.model_copy(update={"schedule_start_time": rfc3339(now)})
    return status


def coscheduling_status_patch(status: CoschedulingPodGroupStatus) -> dict[str, Any]:
    """The merge patch writing ``status`` whole (unset fields omitted)."""
    body: dict[str, Any] = {
        "phase": status.phase,
        "running": status.running,
        "succeeded": status.succeeded,
        "failed": status.failed,
    }
    if status.occupied_by:
        body["occupiedBy"] = status.occupied_by
    if status.schedule_start_time:
        body["scheduleStartTime"] = status.schedule_start_time
    return {"status": body}


class PodGroupStatusController:
    """Keeps every scheduler-plugins PodGroup's ``status`` current.

    Members are the pods labelled ``scheduling.x-k8s.io/pod-group`` in the group's
    namespace, as upstream's controller selects them (upstream lists across all
    namespaces; a group is namespaced, so troupe does not), except a pod that names a
    group of a newer API too: it joins that group (``group_ref_of``) and this one does
    not count it.

    With ``ours`` (whether a scheduler name is one of troupe's profiles), a group's
    status is written only while one of its members names one of troupe's profiles:
    a group whose pods are all left to another scheduler is that scheduler's (or the
    scheduler-plugins controller's) to report, and two writers would fight.

    The informer handlers call ``on_pod_add/update/delete`` with every pod (members
    are picked by label) and ``on_group_add/update/delete`` with every
    ``CoschedulingPodGroup``; pass ``synced`` (``SharedInformers.has_synced``) so that
    nothing is written from a half-listed cache. ``close()`` cancels pending writes.
    """

    def __init__(
        self,
        patch: StatusPatch,
        clock: Clock,
        *,
        supervisor: TaskSupervisor | None = None,
        min_interval: float = 1.0,
        max_backoff: float = 30.0,
        synced: Callable[[], bool] | None = None,
        ours: Callable[[str], bool] | None = None,
    ) -> None:
        self._patch = patch
        self._ours = ours
        # Nothing is written before the pod and group informers have listed: a group
        # seen before its pods would read as Pending (controller-runtime likewise
        # reconciles only after WaitForCacheSync).
        self._synced = synced or (lambda: True)
        self._clock = clock
        self._tasks = supervisor or TaskSupervisor("podgroup-status")
        self.min_interval = min_interval
        self.max_backoff = max_backoff
        self._groups: dict[str, CoschedulingPodGroup] = {}
        self._members: dict[str, dict[PodKey, Pod]] = {}
        # What we wrote last, until the informer shows the server has it: the base
        # of the next computation (the phase machine depends on the previous phase).
        self._written: dict[str, tuple[CoschedulingPodGroupStatus, str]] = {}
        self._dirty: set[str] = set()
        self._flushers: dict[str, asyncio.Task[None]] = {}
        self._not_before: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self.writes = 0
        self.write_failures = 0

    # --- informer handlers ---------------------------------------------------------------

    # Every pod of the cluster passes here: a pod in no scheduler-plugins group costs
    # one label lookup per event.

    def on_pod_add(self, pod: Pod) -> None:
        name = _member_of(pod)
        if not name:
            return
        key = _key(pod.metadata.namespace, name)
        self._members.setdefault(key, {})[pod.key] = pod
        self._mark(key)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        old_name = _member_of(old)
        new_name = _member_of(new)
        if not old_name and not new_name:
            return
        old_key = _key(old.metadata.namespace, old_name) if old_name else None
        new_key = _key(new.metadata.namespace, new_name) if new_name else None
        if old_key is not None and old_key != new_key:
            self.on_pod_delete(old)
        if new_key is None:
            return
        members = self._members.setdefault(new_key, {})
        members[new.key] = new
        if (
            old_key != new_key
            or old.status.phase != new.status.phase
            or old.metadata.owner_references != new.metadata.owner_references
        ):
            self._mark(new_key)

    def on_pod_delete(self, pod: Pod) -> None:
        name = _member_of(pod)
        if not name:
            return
        key = _key(pod.metadata.namespace, name)
        members = self._members.get(key)
        if members is not None and members.pop(pod.key, None) is not None:
            if not members:
                del self._members[key]
            self._mark(key)

    def on_group_add(self, pg: CoschedulingPodGroup) -> None:
        key = _key(pg.metadata.namespace, pg.metadata.name)
        self._groups[key] = pg
        self._mark(key)

    def on_group_update(self, old: CoschedulingPodGroup, new: CoschedulingPodGroup) -> None:
        key = _key(new.metadata.namespace, new.metadata.name)
        self._groups[key] = new
        written = self._written.get(key)
        if written is not None and (
            new.status == written[0] or new.metadata.resource_version == written[1]
        ):
            # The echo of our own write: nothing new to compute from.
            del self._written[key]
            if old.spec == new.spec:
                return
        self._mark(key)

    def on_group_delete(self, pg: CoschedulingPodGroup) -> None:
        key = _key(pg.metadata.namespace, pg.metadata.name)
        self._groups.pop(key, None)
        self._written.pop(key, None)
        self._dirty.discard(key)
        self._not_before.pop(key, None)
        self._failures.pop(key, None)

    # --- reading --------------------------------------------------------------------------

    def desired(self, namespace: str, name: str) -> CoschedulingPodGroupStatus | None:
        """The status the group should have now (None for an unknown group)."""
        key = _key(namespace, name)
        pg = self._groups.get(key)
        if pg is None:
            return None
        return self._compute(key, pg)

    def _is_ours(self, key: str) -> bool:
        if self._ours is None:
            return True
        return any(self._ours(p.spec.scheduler_name) for p in self._members.get(key, {}).values())

    @property
    def pending(self) -> int:
        """Groups with a write waiting or in flight."""
        return len(self._flushers)

    async def close(self) -> None:
        await self._tasks.cancel_all()

    # --- writing --------------------------------------------------------------------------

    def _mark(self, key: str) -> None:
        if key not in self._groups:
            return  # no object (yet): its add event marks it
        self._dirty.add(key)
        if key not in self._flushers:
            self._flushers[key] = self._tasks.spawn(self._flush(key), name=f"podgroup status {key}")

    async def _flush(self, key: str) -> None:
        try:
            while key in self._dirty:
                if not self._synced():
                    await self._clock.sleep(self.min_interval)
                    continue
                delay = self._not_before.get(key, float("-inf")) - self._clock.now()
                if delay > 0:
                    await self._clock.sleep(delay)
                    continue
                self._dirty.discard(key)
                await self._sync(key)
        finally:
            self._flushers.pop(key, None)

    def _compute(self, key: str, pg: CoschedulingPodGroup) -> CoschedulingPodGroupStatus:
        written = self._written.get(key)
        if written is not None:
            pg = pg.model_copy(update={"status": written[0]})
        return coscheduling_status(pg, self._members.get(key, {}).values(), self._clock.wall())

    async def _sync(self, key: str) -> None:
        pg = self._groups.get(key)
        if pg is None or not self._is_ours(key):
            return
        written = self._written.get(key)
        base = written[0] if written is not None else pg.status
        status = self._compute(key, pg)
        # Computations are rate-limited too, not only writes: a gang of thousands of
        # pods changing phase must not be recounted on every pod event.
        self._not_before[key] = self._clock.now() + self.min_interval
        if status == base:
            return
        m = pg.metadata
        try:
            reply = await self._patch(
                status_path(GangApi.COSCHEDULING, m.namespace, m.name),
                coscheduling_status_patch(status),
            )
        except WriteFenced:
            # Not sent: this replica is losing its lease and stops; the next leader
            # writes the status from the members.
            self.write_failures += 1
            return
        except ApiError as err:
            self.write_failures += 1
            if err.is_not_found:
                return  # deleted meanwhile: its delete event cleans up
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            delay = min(self.max_backoff, self.min_interval * 2.0 ** (failures - 1))
            self._not_before[key] = self._clock.now() + delay
            log.warning("podgroup status write failed", podgroup=key, error=str(err)[:300])
            self._dirty.add(key)  # try again after the backoff
            return
        self._failures.pop(key, None)
        self.writes += 1
        if key in self._groups:
            self._written[key] = (status, _resource_version(reply))


def _member_of(pod: Pod) -> str:
    """The scheduler-plugins group ``pod`` counts for ("" for none)."""
    name = pod.metadata.labels.get(POD_GROUP_LABEL)
    if not name:
        return ""
    ref = group_ref_of(pod)
    return name if ref is not None and ref.api is GangApi.COSCHEDULING else ""


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def _resource_version(reply: object) -> str:
    if isinstance(reply, Mapping):
        meta = reply.get("metadata")
        if isinstance(meta, Mapping):
            rv = meta.get("resourceVersion")
            if isinstance(rv, str):
                return rv
    return ""


# --- v1alpha2 PodGroup conditions ---------------------------------------------------------


def pod_group_scheduled_condition(
    previous: Sequence[Condition],
    outcome: ScheduledOutcome,
    message: str,
    now: float,
    condition_type: str = POD_GROUP_SCHEDULED,
) -> list[Condition]:
    """``previous`` with ``condition_type`` (``PodGroupScheduled`` of v1alpha2,
    ``PodGroupInitiallyScheduled`` of v1beta1) set for ``outcome`` (True for
    Scheduled, False otherwise; reason = outcome). The transition time moves only
    when the status does. A True condition is never turned False: once a group has
    been scheduled, a later failed attempt (say, of a replacement member) does not
    say it was not, as upstream's 1.36 pod-group cycle; ``previous`` comes back
    unchanged then, and when nothing would change. ``PodGroupInitiallyScheduled`` is
    terminal once True (1.37): it is not touched again at all."""
    status = "True" if outcome == "Scheduled" else "False"
    current = next((c for c in previous if c.type == condition_type), None)
    if current is not None:
        if current.status == "True" and (
            status == "False" or condition_type == POD_GROUP_INITIALLY_SCHEDULED
        ):
            return list(previous)
        if (current.status, current.reason, current.message) == (status, outcome, message):
            return list(previous)
    keep_time = current is not None and current.status == status and current.last_transition_time
    condition = Condition(
        type=condition_type,
        status=status,
        reason=outcome,
        message=message,
        last_transition_time=(
            current.last_transition_time if current is not None and keep_time else rfc3339(now)
        ),
    )
    if current is None:
        return [*previous, condition]
    return [condition if c.type == condition_type else c for c in previous]


def conditions_patch(conditions: Sequence[Condition]) -> dict[str, Any]:
    """The merge patch of ``status.conditions`` (a merge patch replaces the list, so
    it carries every condition, not only ours)."""
    return {
        "status": {
            "conditions": [c.model_dump(by_alias=True, exclude_none=True) for c in conditions]
        }
    }
