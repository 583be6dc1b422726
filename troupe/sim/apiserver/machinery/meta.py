"""Small helpers for object metadata: timestamps, UIDs, generated names, copies.

Used by the store and the per-kind strategies. Timestamps are RFC 3339 UTC with whole
seconds (``metav1.Time``); ``micro_time`` is ``metav1.MicroTime``.
"""

from __future__ import annotations

import random
import string
import time
import uuid
from typing import Any

_ALNUM = string.ascii_lowercase + string.digits
# names.SimpleNameGenerator: 5 random characters from an alphabet without vowels and
# look-alikes ("bcdfghjklmnpqrstvwxz2456789").
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_rng = random.Random()


def rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def micro_time(epoch: float) -> str:
    whole = int(epoch)
    micros = round((epoch - whole) * 1_000_000)
    if micros == 1_000_000:
        whole, micros = whole + 1, 0
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{micros:06d}Z"


def parse_rfc3339(text: str) -> float:
    """Seconds since the epoch of an RFC 3339 UTC timestamp (fraction ignored)."""
    import calendar

    return float(calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")))


def new_uid() -> str:
    return str(uuid.uuid4())


def generate_name(prefix: str) -> str:
    # Upstream trims the prefix so the result fits in 63 characters.
    base = prefix[: 63 - 5]
    return base + "".join(_rng.choice(_GENERATE_ALPHABET) for _ in range(5))


def clone(value: Any) -> Any:
    """A deep copy of a JSON value (faster than ``copy.deepcopy`` for dicts and lists)."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def object_name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, dict) else ""


def object_namespace(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("namespace") or "") if isinstance(meta, dict) else ""
