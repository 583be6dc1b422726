"""Garbage-collector tuning for a scheduler holding a large, long-lived heap.

A synced cache of 10,000 pods is a few million tracked objects; CPython's default
thresholds run full collections over all of them every few thousand allocations,
which lands as 100+ µs pauses inside whatever allocates (JSON parsing, binding).
troupe raises the young-generation threshold and, once the caches are synced,
freezes everything alive then (the cache, the plugins, the queue) out of future
collections.
"""

from __future__ import annotations

import gc


def tune_gc() -> None:
    gc.set_threshold(50_000, 20, 100)


def freeze_long_lived() -> None:
    """Collect once, then exclude every surviving object from later collections."""
    gc.collect()
    gc.freeze()
