"""How objects are written on the wire: compact UTF-8 JSON.

Every response body and every watch event line goes through ``dumps``. Used by the
endpoints, the server and the watch events of ``storage.watchers``.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import to_json


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON. pydantic-core's serializer writes what ``json.dumps`` with
    compact separators and ``ensure_ascii=False`` writes (floats may spell their
    exponent differently, ``1e-7`` for ``1e-07``), in a quarter of the time: every
    response body and every watch event line goes through here."""
    return to_json(value)
