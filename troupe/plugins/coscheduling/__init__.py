"""Coscheduling: scheduler-plugins' Permit-barrier gang plugin, for profiles moved
over from scheduler-plugins and as the benchmark's baseline.

Built by ``troupe.plugins.registry`` from ``CoschedulingArgs``; see ``plugin.py``.
``GroupMembers`` and ``PODS_TO_ACTIVATE`` say what it reads beyond the framework
contract (``contract.py``).
"""

from __future__ import annotations

from troupe.plugins.coscheduling.args import CoschedulingArgs
from troupe.plugins.coscheduling.contract import PODS_TO_ACTIVATE, GroupMembers
from troupe.plugins.coscheduling.plugin import Coscheduling

__all__ = ["PODS_TO_ACTIVATE", "Coscheduling", "CoschedulingArgs", "GroupMembers"]
