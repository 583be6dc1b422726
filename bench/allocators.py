"""What the soak's ``--diagnose`` reads of the allocators: CPython's pymalloc
(``sys._debugmallocstats``) and glibc malloc (``mallinfo2``), with the collector's
counts and the event recorder's series, in one line."""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import tempfile

from troupe.scheduler.loop.schedule_one import Scheduler


def pymalloc_figures() -> dict[str, int]:
    """CPython's small-object allocator: arenas held now and bytes in used blocks
    (``sys._debugmallocstats``, which writes to file descriptor 2)."""
    figures: dict[str, int] = {}
    with tempfile.TemporaryFile() as out:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        for line in out.read().decode(errors="replace").splitlines():
            name, sep, value = line.partition("=")
            if sep and name.startswith("# "):
                figures.setdefault(name[2:].strip(), int(value.strip().replace(",", "")))
    return figures


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


_LIBC = ctypes.CDLL(None)


def malloc_figures() -> dict[str, int]:
    """glibc malloc's main heap (``mallinfo2``): bytes in use, free, mmapped; empty
    where the C library has no ``mallinfo2``."""
    try:
        mallinfo2 = _LIBC.mallinfo2
    except AttributeError:
        return {}
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return {
        "heap": info.arena,
        "in_use": info.uordblks,
        "free": info.fordblks,
        "mmapped": info.hblkhd,
    }


def allocator_figures(scheduler: Scheduler) -> str:
    """One line: pymalloc arenas and used blocks, glibc heap, gc generations."""
    py = pymalloc_figures()
    c = malloc_figures()
    mb = 2**20
    counts = gc.get_count()
    collections = [s["collections"] for s in gc.get_stats()]
    return (
        f"pymalloc: {py.get('arenas allocated current', 0)} arenas "
        f"(high-water {py.get('arenas highwater mark', 0)}), "
        f"{py.get('bytes in allocated blocks', 0) / mb:.1f} MB in blocks, "
        f"{py.get('bytes in available blocks', 0) / mb:.1f} MB free blocks; "
        f"malloc: heap {c.get('heap', 0) / mb:.1f} MB, in use {c.get('in_use', 0) / mb:.1f}, "
        f"free {c.get('free', 0) / mb:.1f}, mmapped {c.get('mmapped', 0) / mb:.1f}; "
        f"gc counts {counts}, collections {collections}, "
        f"frozen {gc.get_freeze_count()}; "
        f"event series {len(getattr(scheduler.client, 'events', ()))}"
    )
