"""Who a request comes from: the static admin token and kube-apiserver's token file.

``TokenUsers`` reads a file in the format of kube-apiserver's ``--token-auth-file``: CSV,
one user a line, ``token,user,uid[,"group1,group2"]`` (further columns ignored, a line
with an empty token skipped, a later duplicate token wins). ``Authenticator`` combines
it with ``ApiServer``'s single admin ``token`` (user ``admin`` in ``system:masters``):

* a bearer token it knows authenticates as its user, with ``system:authenticated``
  added to the groups (upstream's ``AuthenticatedGroupAdder``);
* a bearer token it does not know is refused with 401, as kube-apiserver does even
  with anonymous requests allowed;
* no token: refused with 401 when an admin token is configured (the server's
  historical behaviour), else an anonymous request (``system:anonymous``).

Requests are not authorized: an authenticated or anonymous request may do anything.
TokenReviews (``endpoints/reviews.py``) answer with ``authenticate``.
"""

from __future__ import annotations

import csv
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

AUTHENTICATED: Final = "system:authenticated"
MASTERS: Final = "system:masters"
ANONYMOUS: Final = "system:anonymous"
UNAUTHENTICATED: Final = "system:unauthenticated"
ADMIN_USER: Final = "admin"


class TokenFileError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()

    def as_status(self) -> dict[str, object]:
        """``status.user`` of a TokenReview."""
        body: dict[str, object] = {"username": self.name, "uid": self.uid}
        if self.groups:
            body["groups"] = list(self.groups)
        return body


def parse_token_file(text: str, origin: str = "token file") -> dict[str, UserInfo]:
    """Token -> user of a ``--token-auth-file``; ``TokenFileError`` on a short line."""
    users: dict[str, UserInfo] = {}
    for number, record in enumerate(csv.reader(text.splitlines()), start=1):
        if not record:
            continue
        if len(record) < 3:
            raise TokenFileError(
                f"token file {origin!r} must have at least 3 columns (token, user name, "
                f"user uid), found {len(record)} on record {number}"
            )
        token, name, uid = record[0], record[1], record[2]
        if not token:
            continue
        groups = tuple(record[3].split(",")) if len(record) > 3 and record[3] else ()
        users[token] = UserInfo(name, uid, groups)
    return users


class TokenUsers:
    """The users of a token file, by token."""

    def __init__(self, users: Mapping[str, UserInfo]) -> None:
        self._users = dict(users)

    @classmethod
    def from_file(cls, path: str | Path) -> TokenUsers:
        text = Path(path).read_text(encoding="utf-8")
        return cls(parse_token_file(text, str(path)))

    @classmethod
    def of(cls, rows: Iterable[tuple[str, str, str, Iterable[str]]]) -> TokenUsers:
        """From (token, user, uid, groups) rows, for tests."""
        return cls({t: UserInfo(n, u, tuple(g)) for t, n, u, g in rows})

    def with_user(self, token: str, user: UserInfo) -> TokenUsers:
        """These users and one more."""
        return TokenUsers({**self._users, token: user})

    def get(self, token: str) -> UserInfo | None:
        return self._users.get(token)

    def __len__(self) -> int:
        return len(self._users)


def _with_authenticated(user: UserInfo) -> UserInfo:
    if AUTHENTICATED in user.groups:
        return user
    return UserInfo(user.name, user.uid, (*user.groups, AUTHENTICATED))


class Authenticator:
    def __init__(self, admin_token: str | None = None, users: TokenUsers | None = None) -> None:
        self.admin_token = admin_token
        self.users = users

    @property
    def active(self) -> bool:
        """Whether requests' credentials are looked at at all."""
        return self.admin_token is not None or self.users is not None

    def authenticate(self, token: str) -> UserInfo | None:
        """The user of a bearer token (groups include ``system:authenticated``), or None."""
        if not token:
            return None
        admin = self.admin_token
        if admin is not None and hmac.compare_digest(token.encode(), admin.encode()):
            return _with_authenticated(UserInfo(ADMIN_USER, "", (MASTERS,)))
        if self.users is not None:
            user = self.users.get(token)
            if user is not None:
                return _with_authenticated(user)
        return None

    def request_user(self, authorization: str) -> UserInfo | None:
        """The user of a request's ``Authorization`` header; an anonymous user when it
        has none and anonymous requests are allowed; None: refuse with 401."""
        scheme, _, token = authorization.strip().partition(" ")
        if not authorization.strip():
            if self.admin_token is not None:
                return None
            return UserInfo(ANONYMOUS, "", (UNAUTHENTICATED,))
        if scheme.lower() != "bearer":
            return None
        return self.authenticate(token.strip())
