"""What Coscheduling needs beyond ``troupe.api``'s contract, stated as small types.

Upstream's plugin lists a group's pods from the shared pod informer (PreFilter's
sibling count, PostFilter's backoff condition, Permit's ``ActivateSiblings``) and asks
the scheduler to move pods back to the active queue through the
``kubernetes.io/pods-to-activate`` cycle-state entry. troupe's ``GroupDirectory``
answers policies and placed counts only, so:

- ``GroupMembers`` is what the plugin reads when ``handle.groups`` also implements it
  (checked once, at construction); without it the sibling count is unknown and the
  checks that need it are skipped (see ``plugin.py``);
- ``PODS_TO_ACTIVATE`` is the cycle-state entry the plugin adds sibling pod keys to
  when the scheduler has put one in the state before the cycle (upstream
  ``framework.PodsToActivateKey``); when absent, nothing is asked.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol, runtime_checkable

from troupe.api.cycle import PODS_TO_ACTIVATE as CYCLE_PODS_TO_ACTIVATE
from troupe.api.gangs import GroupKey


@runtime_checkable
class GroupMembers(Protocol):
    def member_keys(self, key: GroupKey) -> Collection[str]:
        """Keys (``namespace/name``) of every pod that exists and names the group,
        in any phase (upstream lists all pods carrying the group label)."""
        ...


# The scheduler's cycle-state entry for pods to activate (re-exported for callers).
PODS_TO_ACTIVATE = CYCLE_PODS_TO_ACTIVATE
