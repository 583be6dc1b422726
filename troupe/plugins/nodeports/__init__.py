"""NodePorts: a pod's host ports must be free on the node.

Run by the framework at PreFilter and Filter; see ``node_ports.py``.
"""

from __future__ import annotations

from troupe.plugins.nodeports.node_ports import NodePorts

__all__ = ["NodePorts"]
