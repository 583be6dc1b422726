"""DefaultBinder: the Bind plugin that writes ``pods/binding`` for the chosen node.

The client (``troupe.api.client.SchedulerClient``) sends the pod UID as a
precondition, so a pod deleted and recreated under the same name is never bound by
mistake. An API failure becomes an ERROR status; the binding cycle then forgets the
assumed pod and requeues it, as upstream.
"""

from __future__ import annotations

from troupe.api.client import ApiError
from troupe.api.cycle import CycleState
from troupe.api.framework import Handle
from troupe.api.podinfo import PodInfo
from troupe.api.status import SUCCESS, Status


class DefaultBinder:
    name = "DefaultBinder"

    def __init__(self, args: None, handle: Handle) -> None:
        del args
        self._handle = handle

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        try:
            await self._handle.client.bind(pod.pod, node_name)
        except ApiError as err:
            return Status.from_error(err, plugin=self.name)
        return SUCCESS
