"""ExpiringKeys: a set of keys, each forgotten after its own time to live.

Upstream Coscheduling keeps two go-cache stores of group names: groups that passed
the minResources check recently (``permittedPG``) and groups backed off after a
failure (``backedOffPG``). This is the same store on the injected clock, so tests
move time instead of sleeping. Used only by ``plugin.py``.
"""

from __future__ import annotations

from troupe.api.clock import Clock

# go-cache: an entry added with a zero TTL takes the store's default expiration, 3 s
# for upstream's permitted groups (a zero backoff is never added).
DEFAULT_TTL_SECONDS = 3.0


class ExpiringKeys:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._expiry: dict[str, float] = {}

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        expiry = self._expiry.get(key)
        if expiry is None:
            return False
        # go-cache keeps an entry until the clock is strictly past its expiration.
        if self._clock.now() > expiry:
            del self._expiry[key]
            return False
        return True

    def add(self, key: str, ttl_seconds: float) -> None:
        """Remember ``key`` unless it is already present: like go-cache ``Add``, a
        live entry is not extended."""
        if key in self:
            return
        now = self._clock.now()
        self._expiry = {k: t for k, t in self._expiry.items() if now <= t}
        self._expiry[key] = now + (ttl_seconds if ttl_seconds > 0 else DEFAULT_TTL_SECONDS)

    def discard(self, key: str) -> None:
        self._expiry.pop(key, None)
