"""HTTP watch streams (``?watch=true``), as ``endpoints/handlers/watch.go`` serves them.

Newline-delimited ``{"type":...,"object":...}`` in one chunked 200 response, one write per
drained batch of events. A resourceVersion older than the kept history is answered, as the
cacher does, with a 200 stream carrying one ERROR event (Status 410 Expired) that then
closes; so is one from a resourceVersion newer than the store's (504, "Too large resource
version"). ``allowWatchBookmarks`` adds BOOKMARK events every ``bookmark_interval``
seconds; ``sendInitialEvents=true`` (WatchList) ends the initial ADDED events with a
bookmark annotated ``k8s.io/initial-events-end``. Every stream ends: ``timeoutSeconds``
(an int64, else 400) after that many seconds, at most an hour; without it, after a random
30 to 60 minutes, as kube-apiserver's ``--min-request-timeout`` has it.

Called by ``server.ApiServer`` for GET requests with ``watch=true|1``.
"""

from __future__ import annotations

import random
import time
from typing import Any, Final

from aiohttp import web

from troupe.sim.apiserver.endpoints.request import int_param
from troupe.sim.apiserver.endpoints.table import table, wants_table
from troupe.sim.apiserver.machinery.encoding import dumps
from troupe.sim.apiserver.machinery.errors import ApiError
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.machinery.selectors import FieldSelector, LabelSelector
from troupe.sim.apiserver.storage.store import Store
from troupe.sim.apiserver.storage.watchers import Watcher

# How often an idle stream checks whether its client went away.
_LIVENESS_CHECK: Final = 5.0
INITIAL_EVENTS_END: Final = "k8s.io/initial-events-end"
# strconv.ParseBool's true spellings (clients send "true", "1" or Python's "True").
TRUE_VALUES: Final = frozenset({"1", "t", "T", "true", "TRUE", "True"})
# kube-apiserver's --min-request-timeout: a watch without timeoutSeconds ends after a
# random time in [1800, 3600) s. An explicit timeout is held to the same hour.
MIN_REQUEST_TIMEOUT: Final = 1800.0
MAX_WATCH_SECONDS: Final = 2 * MIN_REQUEST_TIMEOUT
_random = random.Random()


def watch_seconds(timeout: int | None) -> float:
    """How long a watch stream lasts: ``timeoutSeconds`` (negative: it ends at once, as
    upstream's timer fires at once) up to ``MAX_WATCH_SECONDS``; absent or 0, upstream's
    random ``[min, 2 × min)`` of ``MIN_REQUEST_TIMEOUT``."""
    if not timeout:
        return MIN_REQUEST_TIMEOUT * (1.0 + _random.random())
    return float(min(timeout, MAX_WATCH_SECONDS))


class WatchStreams:
    """The open watch streams, so faults can cut them all abruptly."""

    def __init__(self) -> None:
        self.open: dict[int, tuple[web.Request, Watcher]] = {}

    def drop_all(self) -> int:
        dropped = 0
        for request, watcher in list(self.open.values()):
            transport = request.transport
            if transport is not None:
                transport.abort()
            watcher.close()
            dropped += 1
        self.open.clear()
        return dropped


def _bookmark(rt: ResourceType, rv: int, initial_end: bool) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    return (
        dumps(
            {
                "type": "BOOKMARK",
                "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta},
            }
        )
        + b"\n"
    )


async def serve_watch(
    request: web.Request,
    store: Store,
    rt: ResourceType,
    namespace: str | None,
    labels: LabelSelector,
    fields: FieldSelector,
    *,
    bookmark_interval: float,
    streams: WatchStreams,
) -> web.StreamResponse:
    query = request.query
    rv = query.get("resourceVersion", "")
    bookmarks = query.get("allowWatchBookmarks", "") in TRUE_VALUES
    send_initial = query.get("sendInitialEvents")
    if send_initial is not None:
        send_initial = "true" if send_initial in TRUE_VALUES else "false"
    deadline = time.monotonic() + watch_seconds(int_param(query, "timeoutSeconds"))
    if send_initial == "false" and rv in ("", "0"):
        rv = str(store.resource_version)  # no synthetic ADDED events: start from now
    elif send_initial == "true":
        rv = ""
    response = web.StreamResponse(
        status=200,
        headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"},
    )
    response.enable_chunked_encoding()
    try:
        watcher = store.watch(rt, namespace, labels, fields, rv)
    except ApiError as error:
        if error.code not in (410, 504):
            raise
        # As the watch cache answers once the request is accepted: a 200 stream whose
        # one ERROR event carries the Status (410 Expired, 504 too large a version).
        await response.prepare(request)
        await response.write(dumps({"type": "ERROR", "object": error.status}) + b"\n")
        await response.write_eof()
        return response
    streams.open[id(request)] = (request, watcher)
    initial_left = len(watcher.queue) if send_initial == "true" else -1
    api_version = rt.api_version
    as_table = wants_table(request.headers.get("Accept", ""))
    include = query.get("includeObject") or "Metadata"
    next_bookmark = time.monotonic() + bookmark_interval
    try:
        await response.prepare(request)
        if initial_left == 0 and bookmarks:
            await response.write(_bookmark(rt, store.resource_version, True))
        while True:
            now = time.monotonic()
            wait = min(_LIVENESS_CHECK, deadline - now)
            if bookmarks:
                wait = min(wait, next_bookmark - now)
            if wait > 0:
                await watcher.wait(wait)
            transport = request.transport
            if transport is None or transport.is_closing():
                return response
            lines: list[bytes] = []
            queue = watcher.queue
            while queue:
                event = queue.popleft()
                translated = watcher.translate(event)
                if translated is not None and as_table:
                    obj = event.previous_at_rv() if translated[1] else event.obj
                    if watcher.convert is not None:
                        obj = watcher.convert(obj)
                    row = table(rt, [obj], store.clock.wall(), include)
                    lines.append(dumps({"type": translated[0], "object": row}) + b"\n")
                elif translated is not None:
                    lines.append(
                        event.line(translated[0], translated[1], api_version, watcher.convert)
                    )
                if initial_left > 0:
                    initial_left -= 1
                    if initial_left == 0 and bookmarks:
                        lines.append(_bookmark(rt, event.rv, True))
            now = time.monotonic()
            if bookmarks and now >= next_bookmark:
                lines.append(_bookmark(rt, store.resource_version, False))
                next_bookmark = now + bookmark_interval
            if lines:
                await response.write(b"".join(lines))
            if watcher.closed or now >= deadline:
                break
        if id(request) in streams.open:
            await response.write_eof()
    except ConnectionError:
        pass  # the client went away: nobody is left to read the rest
    finally:
        streams.open.pop(id(request), None)
        store.unwatch(watcher)
    return response
