"""``GroupKey``: how the scheduler names a group (``troupe.api.gangs.GroupRef.key``).

Its own module so that the gang contract (``troupe.api.gangs``) and the
CompositePodGroup tree (``troupe.api.composite``) can both speak it without importing
each other.
"""

from __future__ import annotations

from typing import NewType

GroupKey = NewType("GroupKey", str)
