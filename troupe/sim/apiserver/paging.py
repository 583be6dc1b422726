"""Continue tokens and list snapshots for paginated lists (``limit`` + ``continue``).

The first page of a paginated list keeps its filtered, sorted result as a snapshot (by
reference: stored objects are immutable), so later pages are consistent with the first,
as an etcd-backed list at a fixed revision is. The token is opaque base64 JSON naming the
list RV, the last key served and the snapshot. A token whose RV predates the kind's watch
history (``compact``) is expired (410), as upstream's is after etcd compaction; a token
whose snapshot was evicted continues over the current objects. Used by ``store.Store``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import OrderedDict
from typing import Any, Final

from troupe.sim.apiserver import errors

MAX_SNAPSHOTS: Final = 64
CONTINUE_EXPIRED: Final = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)


Pairs = list[tuple[str, dict[str, Any]]]


class Snapshots:
    def __init__(self) -> None:
        self._snapshots: OrderedDict[int, Pairs] = OrderedDict()
        self._seq = 0

    def get(self, snapshot_id: int) -> Pairs | None:
        return self._snapshots.get(snapshot_id)

    def add(self, pairs: Pairs) -> int:
        self._seq += 1
        self._snapshots[self._seq] = pairs
        while len(self._snapshots) > MAX_SNAPSHOTS:
            self._snapshots.popitem(last=False)
        return self._seq

    def clear(self) -> None:
        self._snapshots.clear()


def encode_continue(token: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(token, separators=(",", ":")).encode()).decode()


def decode_continue(text: str) -> dict[str, Any]:
    try:
        token = json.loads(base64.urlsafe_b64decode(text.encode()))
        if (
            not isinstance(token, dict)
            or not isinstance(token.get("rv"), int)
            or not isinstance(token.get("start"), str)
        ):
            raise ValueError(text)
        return token
    except (ValueError, binascii.Error):
        raise errors.bad_request(f"continue key is not valid: {text}") from None
