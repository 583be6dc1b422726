"""NodeUnschedulable: cordoned nodes (``spec.unschedulable``) take no new pods.

Run by the framework at PreFilter and Filter; see ``node_unschedulable.py``.
"""

from __future__ import annotations

from troupe.plugins.nodeunschedulable.node_unschedulable import NodeUnschedulable

__all__ = ["NodeUnschedulable"]
