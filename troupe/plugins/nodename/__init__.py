"""NodeName: a pod that names a node in ``spec.nodeName`` fits only that node.

Run by the framework at PreFilter and Filter; see ``node_name.py``.
"""

from __future__ import annotations

from troupe.plugins.nodename.node_name import NodeName

__all__ = ["NodeName"]
