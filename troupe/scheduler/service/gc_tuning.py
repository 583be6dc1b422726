"""Garbage-collector tuning for a scheduler holding a large, long-lived heap.

A synced cache of 10,000 pods is a few million tracked objects; CPython's default
thresholds run full collections over all of them every few thousand allocations,
which lands as 100+ µs pauses inside whatever allocates (JSON parsing, binding).
troupe raises the young-generation threshold and, once the caches are synced,
freezes everything alive then (the cache, the plugins, the queue) out of future
collections.

The young generation holds 200,000 objects: every pod event parsed allocates a few
dozen tracked objects (its model, dicts, lists) that live on in the cache, and at
50,000 the collector ran often enough to cost about 15% of the scheduler's CPU in a
burst of bindings and 100 ms at the 99th percentile of a pod's attempt
(``python -m bench e2e``). A young collection of 200,000 objects takes a few
milliseconds.
"""

from __future__ import annotations

import gc


def tune_gc() -> None:
    gc.set_threshold(200_000, 20, 100)


def freeze_long_lived() -> None:
    """Collect once, then exclude every surviving object from later collections."""
    gc.collect()
    gc.freeze()
