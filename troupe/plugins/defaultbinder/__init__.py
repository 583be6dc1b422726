"""DefaultBinder: binds a pod by POSTing its Binding through the scheduler client.

Called by the binding cycle in ``troupe.scheduler``; see ``default_binder.py``.
"""

from __future__ import annotations

from troupe.plugins.defaultbinder.default_binder import DefaultBinder

__all__ = ["DefaultBinder"]
