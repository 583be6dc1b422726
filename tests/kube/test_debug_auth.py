"""``DelegatedAuth``: TokenReview then SubjectAccessReview, cached as kube-scheduler
caches them, and closed to everyone when the reviews cannot be made."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from typing import Any

from troupe.api.client import ApiError
from troupe.kube.debug_auth import (
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    DelegatedAuth,
    StaticToken,
)
from troupe.kube.transport import Query, Response, WatchStream

PATH = "/debug/troupe/explain"


class Reviewer:
    """A fake API server: alice (group sre) is allowed, bob is not."""

    base_url = "https://api.test"

    def __init__(self, *, serves: bool = True, down: bool = False) -> None:
        self.serves, self.down = serves, down
        self.allowed = {"alice"}
        self.forbids_reviews = False  # SubjectAccessReviews answered 403
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: bytes | None = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Response:
        if self.down:
            raise ApiError(0, f"{method} {path}: connection refused")
        if method == "GET":
            group_version = path.removeprefix("/apis/")
            plural = {
                "authentication.k8s.io/v1": "tokenreviews",
                "authorization.k8s.io/v1": "subjectaccessreviews",
            }[group_version]
            resources = [{"name": plural}] if self.serves else []
            return Response(200, json.dumps({"resources": resources}).encode())
        review = json.loads(body or b"{}")
        self.sent.append((path, review))
        if not self.serves or (path == SUBJECT_ACCESS_REVIEWS and self.forbids_reviews):
            return Response(
                403 if self.serves else 404,
                b'{"kind":"Status","message":"the server could not find it"}',
            )
        spec = review["spec"]
        if path == TOKEN_REVIEWS:
            users = {"alice-token": ("alice", ["sre"]), "bob-token": ("bob", [])}
            if spec["token"] in users:
                name, groups = users[spec["token"]]
                status: dict[str, Any] = {
                    "authenticated": True,
                    "user": {"username": name, "uid": "u-" + name, "groups": groups},
                }
            else:
                status = {"authenticated": False}
        else:
            assert path == SUBJECT_ACCESS_REVIEWS
            status = {"allowed": spec["user"] in self.allowed}
        return Response(201, json.dumps({**review, "status": status}).encode())

    def stream(
        self, path: str, *, query: Query, timeout: float
    ) -> AbstractAsyncContextManager[WatchStream]:
        raise NotImplementedError

    def reviews(self, path: str) -> list[dict[str, Any]]:
        return [body for p, body in self.sent if p == path]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def auth(reviewer: Reviewer, clock: Clock | None = None) -> DelegatedAuth:
    return DelegatedAuth(reviewer, reviewer, clock=clock or Clock())


async def test_an_allowed_user_passes_and_the_reviews_say_who_asks_what() -> None:
    reviewer = Reviewer()
    assert await auth(reviewer).check("Bearer alice-token", "get", PATH) is None
    (token_review,) = reviewer.reviews(TOKEN_REVIEWS)
    assert token_review == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "alice-token"},
    }
    (sar,) = reviewer.reviews(SUBJECT_ACCESS_REVIEWS)
    assert sar["spec"] == {
        "user": "alice",
        "groups": ["sre"],
        "uid": "u-alice",
        "nonResourceAttributes": {"path": PATH, "verb": "get"},
    }


async def test_refusals_401_without_or_with_a_bad_token_403_when_not_allowed() -> None:
    reviewer = Reviewer()
    delegated = auth(reviewer)
    for header in ("", "Basic YWxpY2U6cHc=", "Bearer ", "Bearer mallory-token"):
        refused = await delegated.check(header, "get", PATH)
        assert refused is not None and refused.status == 401, header
    refused = await delegated.check("Bearer bob-token", "get", PATH)
    assert refused is not None and refused.status == 403
    assert refused.message == f'Forbidden: User "bob" cannot get path "{PATH}"'


async def test_answers_are_cached_for_ten_seconds_then_asked_again() -> None:
    reviewer, clock = Reviewer(), Clock()
    delegated = auth(reviewer, clock)
    for header in ("Bearer alice-token", "Bearer bob-token", "Bearer mallory-token"):
        await delegated.check(header, "get", PATH)
    assert delegated.reviews == 5  # 3 TokenReviews, 2 SubjectAccessReviews
    clock.now += 9.9
    reviewer.allowed = {"bob"}  # changed on the server: not seen while cached
    assert await delegated.check("Bearer alice-token", "get", PATH) is None
    refused = await delegated.check("Bearer bob-token", "get", PATH)
    assert refused is not None and refused.status == 403
    refused = await delegated.check("Bearer mallory-token", "get", PATH)
    assert refused is not None and refused.status == 401
    assert delegated.reviews == 5
    clock.now += 0.2
    refused = await delegated.check("Bearer alice-token", "get", PATH)
    assert refused is not None and refused.status == 403
    assert await delegated.check("Bearer bob-token", "get", PATH) is None
    assert delegated.reviews == 9


async def test_fails_closed_when_the_api_server_does_not_serve_the_reviews() -> None:
    reviewer = Reviewer(serves=False)
    delegated = auth(reviewer)
    problems = await delegated.probe()
    assert len(problems) == 2
    assert "does not serve authentication.k8s.io/v1 tokenreviews" in problems[0]
    assert "does not serve authorization.k8s.io/v1 subjectaccessreviews" in problems[1]
    refused = await delegated.check("Bearer alice-token", "get", PATH)
    assert refused is not None and refused.status == 401  # the TokenReview failed
    assert "does not serve this review kind" in refused.message
    # Not cached: asked again next time.
    await delegated.check("Bearer alice-token", "get", PATH)
    assert len(reviewer.reviews(TOKEN_REVIEWS)) == 2


async def test_an_access_review_that_cannot_be_made_is_a_500_not_cached() -> None:
    reviewer = Reviewer()
    reviewer.forbids_reviews = True
    delegated = auth(reviewer)
    refused = await delegated.check("Bearer alice-token", "get", PATH)
    assert refused is not None and refused.status == 500
    reviewer.forbids_reviews = False
    assert await delegated.check("Bearer alice-token", "get", PATH) is None


async def test_fails_closed_when_the_api_server_is_unreachable() -> None:
    delegated = auth(Reviewer(down=True))
    refused = await delegated.check("Bearer alice-token", "get", PATH)
    assert refused is not None and refused.status == 401
    assert "connection refused" in refused.message
    assert len(await delegated.probe()) == 2


async def test_a_server_serving_both_reviews_probes_clean() -> None:
    assert await auth(Reviewer()).probe() == []


async def test_the_static_token() -> None:
    static = StaticToken("s3cret-token-0123456789")
    assert await static.check("Bearer s3cret-token-0123456789", "get", PATH) is None
    missing = await static.check("", "get", PATH)
    assert missing is not None and missing.status == 401
    wrong = await static.check("Bearer other", "get", PATH)
    assert wrong is not None and wrong.status == 403
