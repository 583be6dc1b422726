"""TaintToleration: nodes whose taints the pod does not tolerate are filtered out
(NoSchedule, NoExecute) or scored down (PreferNoSchedule).

Run by the framework at PreFilter, Filter, PreScore, Score and NormalizeScore; see
``taint_toleration.py``.
"""

from __future__ import annotations

from troupe.plugins.tainttoleration.taint_toleration import TaintToleration

__all__ = ["TaintToleration"]
