"""The scheduler's profiles: one framework per ``schedulerName``.

Built once by the composition root (``troupe.scheduler.service.wiring``) and read by
the loop (which framework schedules a popped pod), the queue (PreEnqueue, which gang
a pod is queued with), the event handlers and the PodGroup status controller (is a
pod ours) and gang recovery (a profile's ``partialGangPolicy``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from troupe.api.gangs import GroupRef, group_ref_of
from troupe.api.objects import Pod
from troupe.api.status import SUCCESS, Status
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.gangs.directory import GangDirectory


class Profiles(Mapping[str, Framework]):
    """``schedulerName`` -> the framework of that profile, in profile order."""

    def __init__(self, frameworks: Mapping[str, Framework], groups: GangDirectory) -> None:
        if not frameworks:
            raise ValueError("a scheduler needs at least one profile")
        self._frameworks = dict(frameworks)
        self._groups = groups
        self.first = next(iter(self._frameworks.values()))

    def __getitem__(self, name: str) -> Framework:
        return self._frameworks[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._frameworks)

    def __len__(self) -> int:
        return len(self._frameworks)

    def owns(self, scheduler_name: str) -> bool:
        return scheduler_name in self._frameworks

    def pre_enqueue(self, pod: Pod) -> Status:
        fwk = self._frameworks.get(pod.spec.scheduler_name)
        return fwk.run_pre_enqueue(pod) if fwk is not None else SUCCESS

    def group_of(self, pod: Pod) -> GroupRef | None:
        """The gang a pod is queued with (the CompositePodGroup its PodGroup is under,
        when that is a gang); None to queue it on its own — including in profiles
        whose gangs meet pod by pod at a Permit barrier (scheduler-plugins'
        algorithm)."""
        fwk = self._frameworks.get(pod.spec.scheduler_name)
        if fwk is None or fwk.pod_by_pod_gangs:
            return None
        ref = group_ref_of(pod)
        # KEP-6012: the pods of a gang CompositePodGroup's leaves are one entity.
        return self._groups.entity_ref(ref) if ref is not None else None

    def partial_gang_policy(self, scheduler_name: str) -> str | None:
        fwk = self._frameworks.get(scheduler_name)
        return fwk.profile.partial_gang_policy if fwk is not None else None
