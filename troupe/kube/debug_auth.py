"""Who may read the scheduler's ``/debug/*`` endpoints (``HealthServer``).

Two ways, chosen by ``troupe run --debug-auth`` (docs/explain.md):

* ``StaticToken``: the caller presents one shared bearer token (``--debug-token-file``);
* ``DelegatedAuth``: as kube-scheduler's delegated authentication and authorization.
  The caller's bearer token goes through a ``TokenReview``
  (``authentication.k8s.io/v1``); the user it names, with its groups, through a
  ``SubjectAccessReview`` (``authorization.k8s.io/v1``) for the verb (``get``) on the
  non-resource path. Answers are cached as kube-scheduler caches them: a token's
  review 10 s (authenticated or not), an access decision 10 s (allowed or denied);
  a review that could not be made is not cached.

Both answer ``None`` (go ahead) or a ``Refusal``: 401 without a bearer token or with
one that does not authenticate, 403 when the user is not allowed. ``DelegatedAuth``
fails closed as kube-scheduler's filters do: when a review cannot be made (the API server
is unreachable, or does not serve ``tokenreviews`` / ``subjectaccessreviews``) the request
is refused, 401 when the TokenReview failed and 500 when the SubjectAccessReview did,
and the reason is logged; ``probe`` checks at start-up that both kinds are served.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, Protocol, TypeVar

import structlog
from kubernetes_asyncio.client import ApiClient

from troupe.api.client import ApiError
from troupe.kube.connection import connect
from troupe.kube.transport import HttpTransport, Timeouts, Transport

log = structlog.get_logger("troupe.kube.debug_auth")

TOKEN_REVIEWS: Final = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS: Final = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
AUTHN_TTL: Final = 10.0
ALLOW_TTL: Final = 10.0
DENY_TTL: Final = 10.0
_CACHE_LIMIT: Final = 4096


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    message: str


class DebugAuth(Protocol):
    @property
    def mode(self) -> str:
        """``token`` or ``delegated``, for the log."""
        ...

    async def check(self, authorization: str, verb: str, path: str) -> Refusal | None:
        """None when the request with this ``Authorization`` header may go ahead."""
        ...


def bearer_token(authorization: str) -> str:
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


_NO_TOKEN: Final = Refusal(401, "Unauthorized: a bearer token is required")


class StaticToken:
    """One shared token, compared in constant time: none 401, another one 403."""

    mode = "token"

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def check(self, authorization: str, verb: str, path: str) -> Refusal | None:
        token = bearer_token(authorization)
        if not token:
            return _NO_TOKEN
        if not hmac.compare_digest(token.encode(), self._token):
            return Refusal(403, "Forbidden: the token is not the debug token")
        return None


@dataclass(frozen=True, slots=True)
class ReviewServer:
    """Where reviews go: ``connect``'s arguments."""

    kubeconfig: str | None
    master: str | None = None
    in_cluster: bool = False


@dataclass(frozen=True, slots=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()


class ReviewUnavailable(Exception):
    """A TokenReview or SubjectAccessReview got no usable answer."""


K = TypeVar("K")
V = TypeVar("V")


class _TtlCache(Generic[K, V]):
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._entries: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> tuple[bool, V | None]:
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        if entry[0] <= self._clock():
            del self._entries[key]
            return False, None
        return True, entry[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        now = self._clock()
        if len(self._entries) >= _CACHE_LIMIT:
            self._entries = {k: e for k, e in self._entries.items() if e[0] > now}
            if len(self._entries) >= _CACHE_LIMIT:
                self._entries.clear()
        self._entries[key] = (now + ttl, value)


class DelegatedAuth:
    """TokenReview, then SubjectAccessReview, through the API server (see the module doc).

    ``authn`` and ``authz``: transports to the API servers that answer the reviews
    (``--authentication-kubeconfig`` / ``--authorization-kubeconfig``; by default the
    scheduler's own connection)."""

    mode = "delegated"

    def __init__(
        self,
        authn: Transport,
        authz: Transport,
        *,
        clock: Callable[[], float] = time.monotonic,
        authn_ttl: float = AUTHN_TTL,
        allow_ttl: float = ALLOW_TTL,
        deny_ttl: float = DENY_TTL,
    ) -> None:
        self._authn, self._authz = authn, authz
        self._authn_ttl, self._allow_ttl, self._deny_ttl = authn_ttl, allow_ttl, deny_ttl
        self._users: _TtlCache[str, User | None] = _TtlCache(clock)
        self._decisions: _TtlCache[tuple[str, str, tuple[str, ...], str, str], bool] = _TtlCache(
            clock
        )
        self.reviews = 0  # reviews sent, for tests of the cache

        self._clients: list[ApiClient] = []

    @classmethod
    async def connect(
        cls, authn: ReviewServer, authz: ReviewServer, *, user_agent: str
    ) -> DelegatedAuth:
        """Reviews through connections to these servers (one when they are the same),
        10 s per review at most; ``close`` closes them. Raises ``KubeConnectionError``
        when a kubeconfig cannot be loaded."""
        timeouts = Timeouts(connect=5.0, total=10.0)
        clients: dict[ReviewServer, ApiClient] = {}
        try:
            for server in (authn, authz):
                if server not in clients:
                    clients[server] = await connect(
                        server.kubeconfig,
                        server.master,
                        server.in_cluster,
                        pool_size=2,
                        user_agent=user_agent,
                    )
        except BaseException:
            for api in clients.values():
                await api.close()
            raise
        auth = cls(HttpTransport(clients[authn], timeouts), HttpTransport(clients[authz], timeouts))
        auth._clients = list(clients.values())
        return auth

    async def close(self) -> None:
        clients, self._clients = self._clients, []
        for api in clients:
            await api.close()

    async def probe(self) -> list[str]:
        """What the API servers do not serve of the two review kinds (empty: all good)."""
        problems: list[str] = []
        for transport, path in (
            (self._authn, TOKEN_REVIEWS),
            (self._authz, SUBJECT_ACCESS_REVIEWS),
        ):
            group_version, _, plural = path.removeprefix("/apis/").rpartition("/")
            try:
                resp = await transport.request("GET", f"/apis/{group_version}")
            except ApiError as exc:
                problems.append(f"cannot ask {transport.base_url} for {group_version}: {exc}")
                continue
            served: list[str] = []
            if resp.ok:
                try:
                    served = [r.get("name") for r in json.loads(resp.body).get("resources", [])]
                except (ValueError, AttributeError):
                    served = []
            if plural not in served:
                problems.append(
                    f"the API server at {transport.base_url} does not serve "
                    f"{group_version} {plural} (HTTP {resp.status})"
                )
        return problems

    async def check(self, authorization: str, verb: str, path: str) -> Refusal | None:
        token = bearer_token(authorization)
        if not token:
            return _NO_TOKEN
        try:
            user = await self.authenticate(token)
        except ReviewUnavailable as exc:
            log.error(
                "delegated authentication failed; refusing the request", path=path, err=str(exc)
            )
            return Refusal(401, f"Unauthorized: {exc}")
        if user is None:
            return Refusal(401, "Unauthorized: the token did not authenticate")
        try:
            allowed = await self.authorize(user, verb, path)
        except ReviewUnavailable as exc:
            log.error(
                "delegated authorization failed; refusing the request", path=path, err=str(exc)
            )
            return Refusal(500, f"Internal Server Error: {exc}")
        if not allowed:
            return Refusal(403, f'Forbidden: User "{user.name}" cannot {verb} path "{path}"')
        return None

    async def _review(self, transport: Transport, path: str, body: dict[str, Any]) -> Any:
        self.reviews += 1
        try:
            resp = await transport.request("POST", path, body=json.dumps(body).encode())
        except ApiError as exc:
            raise ReviewUnavailable(f"POST {path}: {exc}") from exc
        if not resp.ok:
            message = resp.error(f"POST {transport.base_url}{path}").message
            if resp.status == 404:
                message += " (the API server does not serve this review kind)"
            raise ReviewUnavailable(message)
        try:
            status = json.loads(resp.body).get("status") or {}
        except (ValueError, AttributeError) as exc:
            raise ReviewUnavailable(f"POST {path}: the answer is not a review") from exc
        if not isinstance(status, dict):
            raise ReviewUnavailable(f"POST {path}: the answer has no status")
        return status

    async def authenticate(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        hit, cached = self._users.get(key)
        if hit:
            return cached
        status = await self._review(
            self._authn,
            TOKEN_REVIEWS,
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        user: User | None = None
        if status.get("authenticated") is True:
            info = status.get("user") or {}
            groups = info.get("groups") or []
            user = User(
                str(info.get("username") or ""),
                str(info.get("uid") or ""),
                tuple(str(g) for g in groups) if isinstance(groups, list) else (),
            )
        self._users.put(key, user, self._authn_ttl)
        return user

    async def authorize(self, user: User, verb: str, path: str) -> bool:
        key = (user.name, user.uid, user.groups, verb, path)
        hit, cached = self._decisions.get(key)
        if hit and cached is not None:
            return cached
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        status = await self._review(
            self._authz,
            SUBJECT_ACCESS_REVIEWS,
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        allowed = status.get("allowed") is True and status.get("denied") is not True
        self._decisions.put(key, allowed, self._allow_ttl if allowed else self._deny_ttl)
        return allowed
