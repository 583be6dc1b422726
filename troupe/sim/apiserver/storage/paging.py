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
from collections.abc import Callable
from typing import Any, Final

from troupe.sim.apiserver.machinery import errors

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


def paginate(
    snapshots: Snapshots,
    select: Callable[[], Pairs],
    current_rv: int,
    floor: int,
    limit: int,
    continue_token: str,
) -> tuple[list[dict[str, Any]], int, str, int | None]:
    """One page of a list: (items, list RV, next token or "", remainingItemCount or None).

    ``select`` gives the filtered (key, object) pairs sorted by key; ``floor`` is the
    oldest RV the kind can still serve consistently.
    """
    if continue_token:
        token = decode_continue(continue_token)
        list_rv = token["rv"]
        if list_rv < floor:
            raise errors.expired(CONTINUE_EXPIRED)
        snapshot = snapshots.get(token.get("s", -1))
        candidates = snapshot if snapshot is not None else select()
        start = token["start"]
        remaining = [pair for pair in candidates if pair[0] > start]
        snap_id = token.get("s", -1) if snapshot is not None else -1
    else:
        list_rv = current_rv
        remaining = select()
        snap_id = -1
    if limit <= 0 or len(remaining) <= limit:
        return [obj for _, obj in remaining], list_rv, "", None
    if snap_id < 0:
        snap_id = snapshots.add(remaining)
    page = remaining[:limit]
    token_text = encode_continue({"rv": list_rv, "start": page[-1][0], "s": snap_id})
    return [obj for _, obj in page], list_rv, token_text, len(remaining) - limit
