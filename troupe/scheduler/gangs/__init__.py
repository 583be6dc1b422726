"""Gangs: the pod-group cycle and the group state the scheduler keeps.

The cycle (KEP-4671): ``group_cycle`` (one attempt, all or nothing: open an
``attempt``, decide with ``group_algorithm``, act with ``submit``), ``placement``
and ``topology`` (where the members go), ``admission`` (binding an admitted gang,
behind its PreBind barrier), ``preemption`` (KEP-5710, evicting only if the whole
gang then fits), ``timeouts`` (gangs that wait), ``diagnosis`` and ``report`` (what
the members and the group are told).

The state, exported here:

- ``GangDirectory`` (``directory``): each group's policy or problem, from the gang
  informers; placed members, from the scheduler; change notifications for the queue.
  Its CompositePodGroup part (trees and routes) is a ``CompositeDirectory`` it owns
  (``composite_directory``);
- ``PodGroupStatusController`` and ``coscheduling_status`` (``status``): the
  scheduler-plugins PodGroup status, written as the members' pods move;
- ``pod_group_scheduled_condition`` (``status``): the v1alpha2 PodGroup
  ``PodGroupScheduled`` condition after a group scheduling attempt.

The daemon builds one directory and one status controller, feeds both from the
informers (``troupe.kube.gang_informers``) and hands the directory to the
framework and the queue.
"""

from troupe.scheduler.gangs.directory import ChangeCallback, GangDirectory
from troupe.scheduler.gangs.status import (
    PodGroupStatusController,
    StatusPatch,
    conditions_patch,
    coscheduling_status,
    coscheduling_status_patch,
    pod_group_scheduled_condition,
    status_path,
)

__all__ = [
    "ChangeCallback",
    "GangDirectory",
    "PodGroupStatusController",
    "StatusPatch",
    "conditions_patch",
    "coscheduling_status",
    "coscheduling_status_patch",
    "pod_group_scheduled_condition",
    "status_path",
]
