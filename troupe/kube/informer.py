"""List + watch of one resource into a local store, feeding add/update/delete handlers.

``SharedInformers`` runs one ``Informer`` per resource (pods, nodes, priority
classes) as an owned task; the handlers are ``ClusterEventHandlers`` (cache and
queue). An informer does what client-go's Reflector + DeltaFIFO + Indexer do for
kube-scheduler, on raw JSON:

- list in pages (``limit`` + ``continue``), parse each page with one pydantic
  validation, then reconcile against the store: add for new keys, update when the
  resourceVersion changed, delete for keys that vanished — a relist after a lost
  watch never drops nor repeats an event;
- ``selector`` (``fieldSelector`` / ``labelSelector``) narrows every list and watch:
  the Lease watch of leader election reads one object (``metadata.name=<lease>``);
- watch from the list's resourceVersion with bookmarks, ``timeoutSeconds`` jittered
  in [t, 2t) as the reflector does, and a client timeout a little longer; one
  ``validate_json`` per event line (``troupe.kube.wire``); bookmarks only advance the version;
- ``410 Gone`` (HTTP or an in-stream ERROR) relists at once, and so does a 504 "Too
  large resource version" (a server whose history is behind the version watched from,
  as the reflector's ``isTooLargeResourceVersionError``); other failures reconnect after
  a jittered exponential backoff (reflector: 0.8 s doubling to 30 s);
- an object whose UID changed under the same key (deleted and recreated while we
  were not watching) is reported as delete + add, never as an update, so the cache
  never keeps the old pod's node assignment;
- one object that does not parse (a custom resource written without a schema, a
  field of a type troupe does not expect) is left out and logged with its name and
  the offending field, and counted in ``counters.invalid``; it never fails the list
  or the watch it came in, so everything else keeps flowing. It is logged once per
  problem: not again at every relist or unrelated event while it stays the same,
  again when its problem changes or after it was readable or deleted in between. A
  watch event that turns a known object invalid is handled as its deletion (troupe
  can no longer say what it is).

Handlers run synchronously in the informer's task; an exception in one is logged
and counted, and the informer carries on. A ``QuantityError`` (an amount that does
not parse, or is negative) is a user's mistake, not a bug: one error line naming the
object and field, without a traceback.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

import structlog
from pydantic import ValidationError

from troupe.api.client import ApiError
from troupe.api.clock import Clock
from troupe.api.objects import ObjectMeta
from troupe.api.quantity import QuantityError
from troupe.kube.errors import ResponseError
from troupe.kube.transport import Transport
from troupe.kube.wire import ObjectList, StatusObject, event_parser

log = structlog.get_logger("troupe.kube.informer")


class KubeObject(Protocol):
    @property
    def metadata(self) -> ObjectMeta: ...


ObjT = TypeVar("ObjT", bound=KubeObject)


class _Gone(Exception):
    """The resourceVersion we watch from was compacted away, or the server has not
    reached it: relist."""


_parse_status_event = event_parser(StatusObject)
# apierrors.IsTooLargeResourceVersionError's message test (a 504 Timeout).
_TOO_LARGE = "Too large resource version"


def _raise_watch_error(line: bytes) -> None:
    """Raise for an ERROR watch event: ``_Gone`` on 410 or a too large resourceVersion,
    ``ResponseError`` otherwise. Returns when the line is not an ERROR event."""
    try:
        event = _parse_status_event(line)
    except ValidationError:
        return
    if event.type != "ERROR":
        return
    status = event.object
    if status.code == 410 or (status.code == 504 and _TOO_LARGE in status.message):
        raise _Gone
    raise ResponseError(status.code, status.message or "watch error", reason=status.reason)


# --- the informer ----------------------------------------------------------------------


def object_key(obj: KubeObject) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects (client-go's
    ``MetaNamespaceKeyFunc``)."""
    m = obj.metadata
    return f"{m.namespace}/{m.name}" if m.namespace else m.name


@dataclass(frozen=True, slots=True)
class InformerConfig:
    page_size: int = 500
    watch_timeout: float = 300.0  # timeoutSeconds in [watch_timeout, 2 × watch_timeout)
    watch_grace: float = 30.0  # client timeout beyond timeoutSeconds
    list_timeout: float = 60.0
    initial_backoff: float = 0.8
    max_backoff: float = 30.0
    unhealthy_after: float = 60.0  # without contact (and not connected) -> unhealthy


@dataclass(slots=True)
class InformerCounters:
    lists: int = 0
    relists_on_gone: int = 0
    watches: int = 0
    failures: int = 0
    adds: int = 0
    updates: int = 0
    invalid: int = 0
    deletes: int = 0
    handler_errors: int = 0


class Informer(Generic[ObjT]):
    def __init__(
        self,
        transport: Transport,
        path: str,
        model: type[ObjT],
        clock: Clock,
        *,
        on_add: Callable[[ObjT], None] | None = None,
        on_update: Callable[[ObjT, ObjT], None] | None = None,
        on_delete: Callable[[ObjT], None] | None = None,
        key_of: Callable[[ObjT], str] = object_key,
        config: InformerConfig | None = None,
        rng: random.Random | None = None,
        name: str = "",
        selector: Mapping[str, str] | None = None,
    ) -> None:
        self.path = path
        # Query parameters of every list and watch: a field or label selector.
        self._selector = dict(selector or {})
        self.name = name or path
        self._t = transport
        self._clock = clock
        self._on_add = on_add
        self._on_update = on_update
        self._on_delete = on_delete
        self._key_of = key_of
        self.config = config or InformerConfig()
        self._rng = rng or random.Random()
        # pydantic builds the parametrized models at runtime from the class object.
        self._list_model = cast(
            "type[ObjectList[ObjT]]", cast(Any, ObjectList).__class_getitem__(model)
        )
        self._parse_event = event_parser(model)
        self._parse_item = cast("Callable[[object], ObjT]", cast(Any, model).model_validate)
        self.store: dict[str, ObjT] = {}
        # Objects left out as unreadable -> the problem they were logged with.
        self._reported: dict[str, tuple[str, str]] = {}
        self._listed_invalid: set[str] | None = None
        self.resource_version = ""
        self.counters = InformerCounters()
        self._synced = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[Any] | None = None
        self._running = False
        self._connected = False
        self._last_contact = clock.now()

    # --- state read by others ----------------------------------------------------------

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def healthy(self) -> bool:
        """Running, and watching or in contact with the server recently."""
        if not self._running:
            return False
        return (
            self._connected or self._clock.now() - self._last_contact <= self.config.unhealthy_after
        )

    # --- lifecycle ---------------------------------------------------------------------

    def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()

    async def run(self) -> None:
        """List and watch until ``stop()``."""
        task = asyncio.current_task()
        self._task = task
        self._running = True
        self._last_contact = self._clock.now()
        try:
            await self._loop()
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            if task is not None:
                task.uncancel()
        finally:
            self._running = False
            self._connected = False
            self._task = None

    async def _loop(self) -> None:
        need_list = True
        failures = 0
        while not self._stopping:
            try:
                if need_list:
                    await self._list_and_reconcile()
                    need_list = False
                started = self._clock.now()
                seen = await self._watch()
                if seen == 0 and self._clock.now() - started < 1.0 and not self._stopping:
                    # Reflector: a watch that closes at once with nothing in it is an
                    # error, or a misbehaving server would be hammered in a loop.
                    raise ApiError(0, f"very short watch of {self.path}")
                failures = 0
            except _Gone:
                # Reflector: "too old resource version" -> relist from the server.
                self.counters.relists_on_gone += 1
                log.info("watch expired; relisting", informer=self.name)
                need_list = True
            except (ApiError, ValidationError, ValueError) as exc:
                failures += 1
                self.counters.failures += 1
                if not isinstance(exc, ApiError):
                    need_list = True  # an unreadable event: the relist reconciles
                delay = self._backoff(failures)
                log.warning(
                    "list/watch failed; retrying",
                    informer=self.name,
                    error=str(exc)[:300],
                    delay=round(delay, 3),
                )
                await self._clock.sleep(delay)

    def _backoff(self, failures: int) -> float:
        base = min(self.config.max_backoff, self.config.initial_backoff * 2.0 ** (failures - 1))
        return base * (1.0 + self._rng.random())  # wait.Jitter(d, 1.0)

    # --- list --------------------------------------------------------------------------

    async def _list_and_reconcile(self) -> None:
        items: dict[str, ObjT] = {}
        cont = ""
        rv = ""
        self._listed_invalid = set()
        while True:
            query = {**self._selector, "limit": str(self.config.page_size)}
            if cont:
                query["continue"] = cont
            resp = await self._t.request(
                "GET", self.path, query=query, timeout=self.config.list_timeout
            )
            if resp.status == 410 and cont:
                # The continue token expired mid-list: start the list again.
                items.clear()
                self._listed_invalid = set()
                cont = ""
                continue
            if not resp.ok:
                raise resp.error(f"list {self.path}")
            try:
                page = self._list_model.model_validate_json(resp.body)
            except ValidationError:
                # Some item does not parse: take the others one by one.
                page = self._parse_page_leniently(resp.body)
            for obj in page.items or ():
                items[self._key_of(obj)] = obj
            rv = page.metadata.resource_version
            cont = page.metadata.continue_
            if not cont:
                break
        self.counters.lists += 1
        self._last_contact = self._clock.now()
        # What the list did not show unreadable is readable or gone: told afresh later.
        still = self._listed_invalid
        self._listed_invalid = None
        self._reported = {k: v for k, v in self._reported.items() if k in still}
        self.reconcile(items)
        self.resource_version = rv
        self._synced.set()

    def _parse_page_leniently(self, body: bytes) -> ObjectList[ObjT]:
        raw = json.loads(body)
        raw_items = raw.get("items") or [] if isinstance(raw, dict) else []
        good: list[ObjT] = []
        for item in raw_items:
            try:
                good.append(self._parse_item(item))
            except ValidationError as err:
                self._invalid(item, err)
        envelope = {k: v for k, v in raw.items() if k != "items"} if isinstance(raw, dict) else {}
        page = self._list_model.model_validate({**envelope, "items": []})
        page.items = good
        return page

    def _invalid(self, item: object, err: ValidationError, *, in_event: bool = False) -> None:
        self.counters.invalid += 1
        meta = item.get("metadata") if isinstance(item, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        name = str(meta.get("name", "?"))
        namespace = meta.get("namespace")
        key = f"{namespace}/{name}" if namespace else name
        first = err.errors()[0] if err.errors() else {"loc": (), "msg": str(err)}
        loc = first["loc"]
        if in_event and loc and loc[0] == "object":
            loc = loc[1:]  # where in the object, not in the watch event around it
        field = ".".join(str(part) for part in loc)
        # By the error's type: its message differs between a list (Python) and a
        # watch event (JSON) for the same problem.
        problem = (field, str(first.get("type", first["msg"])))
        if self._listed_invalid is not None:
            self._listed_invalid.add(key)
        if self._reported.get(key) == problem:
            return  # told already; it has not changed
        self._reported[key] = problem
        log.error(
            "ignoring an object that does not parse",
            informer=self.name,
            object=key,
            field=field,
            error=first["msg"],
        )

    def reconcile(self, listed: dict[str, ObjT]) -> None:
        """Make the store equal to ``listed``, emitting one handler call per difference."""
        old = self.store
        self.store = dict(listed)
        for key, gone in old.items():
            if key not in listed:
                self._emit_delete(gone)
        for key, obj in listed.items():
            prev = old.get(key)
            if prev is None:
                self._emit_add(obj)
            else:
                self._emit_change(prev, obj)

    # --- watch -------------------------------------------------------------------------

    async def _watch(self) -> int:
        """One watch until the server ends it; the number of event lines seen."""
        timeout_seconds = int(self.config.watch_timeout * (1.0 + self._rng.random()))
        query = {
            **self._selector,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": self.resource_version,
            "timeoutSeconds": str(max(1, timeout_seconds)),
        }
        async with self._t.stream(
            self.path, query=query, timeout=timeout_seconds + self.config.watch_grace
        ) as stream:
            if stream.status == 410:
                raise _Gone
            if stream.status != 200:
                body = await stream.body()
                err = ResponseError(stream.status, body.decode("utf-8", "replace")[:300])
                raise err
            self.counters.watches += 1
            self._connected = True
            self._last_contact = self._clock.now()
            seen = 0
            try:
                async for line in stream.lines():
                    seen += 1
                    self._last_contact = self._clock.now()
                    self.apply(line)
                    if self._stopping:
                        break
            finally:
                self._connected = False
            return seen

    def apply(self, line: bytes) -> None:
        """Apply one watch event line to the store and the handlers."""
        try:
            event = self._parse_event(line)
        except ValidationError as err:
            # An ERROR event carries a Status, whose "status" string is not a valid
            # object status: read it as one (rare path, parsed twice).
            _raise_watch_error(line)
            self._invalid_event(line, err)
            return
        kind = event.type
        if kind == "ERROR":
            _raise_watch_error(line)
        obj = event.object
        rv = obj.metadata.resource_version
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        key = self._key_of(obj)
        prev = self.store.get(key)
        if self._reported:
            self._reported.pop(key, None)
        if kind in ("ADDED", "MODIFIED"):
            self.store[key] = obj
            if prev is None:
                self._emit_add(obj)
            else:
                self._emit_change(prev, obj)
        elif kind == "DELETED":
            # A delete of something never seen (or already reconciled away) is no event.
            if prev is not None:
                del self.store[key]
                self._emit_delete(prev)
        else:
            log.warning("unknown watch event type", informer=self.name, type=kind)
        if rv:
            self.resource_version = rv

    def _invalid_event(self, line: bytes, err: ValidationError) -> None:
        """An event whose object does not parse: log it, forget the object if it was
        known (deleting it is the only safe reading), and move on."""
        try:
            raw = json.loads(line)
        except ValueError:
            raise err from None  # not even JSON: the stream is broken, reconnect
        obj = raw.get("object") if isinstance(raw, dict) else None
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict):
            self._invalid(obj, err, in_event=True)
            return
        name, namespace = meta.get("name"), meta.get("namespace")
        key = f"{namespace}/{name}" if namespace else str(name)
        if raw.get("type") == "DELETED":
            self.counters.invalid += 1
            self._reported.pop(key, None)  # gone: nothing left to ignore
        else:
            self._invalid(obj, err, in_event=True)
        prev = self.store.pop(key, None)
        if prev is not None:
            self._emit_delete(prev)
        rv = meta.get("resourceVersion")
        if isinstance(rv, str) and rv:
            self.resource_version = rv

    # --- handler calls -----------------------------------------------------------------

    def _emit_change(self, prev: ObjT, obj: ObjT) -> None:
        pm, m = prev.metadata, obj.metadata
        if pm.uid and m.uid and pm.uid != m.uid:
            # Same name, different object: the old one is gone.
            self._emit_delete(prev)
            self._emit_add(obj)
            return
        if pm.resource_version == m.resource_version and (pm.resource_version or prev == obj):
            return  # nothing new (a replayed event or an unchanged relist item)
        self.counters.updates += 1
        if self._on_update is not None:
            self._call(self._on_update, prev, obj)

    def _emit_add(self, obj: ObjT) -> None:
        self.counters.adds += 1
        if self._on_add is not None:
            self._call(self._on_add, obj)

    def _emit_delete(self, obj: ObjT) -> None:
        self.counters.deletes += 1
        if self._on_delete is not None:
            self._call(self._on_delete, obj)

    def _call(self, fn: Callable[..., None], *args: ObjT) -> None:
        try:
            fn(*args)
        except QuantityError as exc:
            # An object that parsed but asks for an amount that does not (a request
            # of "1x", a negative one): the user's mistake, told without a traceback.
            self.counters.handler_errors += 1
            log.error(
                "ignoring an object whose quantities do not parse",
                informer=self.name,
                error=str(exc),
            )
        except Exception as exc:
            self.counters.handler_errors += 1
            log.error(
                "informer handler failed",
                informer=self.name,
                handler=getattr(fn, "__name__", repr(fn)),
                error=repr(exc),
                exc_info=exc,
            )
