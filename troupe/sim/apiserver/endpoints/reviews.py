"""TokenReviews and SubjectAccessReviews: create-only kinds answered, never stored.

``POST /apis/authentication.k8s.io/v1/tokenreviews`` authenticates ``spec.token`` with
the server's ``Authenticator`` (``auth/authenticator.py``) and answers ``status.authenticated`` and
``status.user``. ``POST /apis/authorization.k8s.io/v1/subjectaccessreviews`` evaluates
``spec.resourceAttributes`` or ``spec.nonResourceAttributes`` for ``spec.user`` and
``spec.groups`` against the stored RBAC objects (``auth/authorizer.py``) and answers
``status.allowed`` and ``status.reason``. Both reply 201 with the review and its
status, as kube-apiserver does; any other verb is 405. These are what a delegating
component (kube-scheduler, ``troupe run --debug-auth=delegated``) asks.

``ApiServer`` routes requests for these kinds here (``Reviews.handlers``) before its
storage verbs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

from troupe.sim.apiserver.auth.authenticator import Authenticator
from troupe.sim.apiserver.auth.authorizer import Attributes, Policy, authorize
from troupe.sim.apiserver.endpoints.request import ResourceRequest, json_response, read_json
from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.resources import KindKey
from troupe.sim.apiserver.storage.store import Obj, Store

TOKEN_REVIEWS: Final = KindKey("tokenreviews.authentication.k8s.io")
SUBJECT_ACCESS_REVIEWS: Final = KindKey("subjectaccessreviews.authorization.k8s.io")
RBAC_KINDS: Final = (
    "roles.rbac.authorization.k8s.io",
    "rolebindings.rbac.authorization.k8s.io",
    "clusterroles.rbac.authorization.k8s.io",
    "clusterrolebindings.rbac.authorization.k8s.io",
)

ReviewHandler = Callable[[web.Request, ResourceRequest], Awaitable[web.StreamResponse]]


def policy_of(store: Store) -> Policy:
    """The RBAC objects the store holds now."""
    roles, role_bindings, cluster_roles, cluster_role_bindings = (
        store.list(kind, copy=False) for kind in RBAC_KINDS
    )
    return Policy(roles, role_bindings, cluster_roles, cluster_role_bindings)


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def attributes(spec: Obj) -> Attributes:
    """The request a SubjectAccessReview's spec describes."""
    user = str(spec.get("user") or "")
    groups = _strings(spec.get("groups"))
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        return Attributes(
            user,
            groups,
            verb=str(resource.get("verb") or ""),
            group=str(resource.get("group") or ""),
            resource=str(resource.get("resource") or ""),
            subresource=str(resource.get("subresource") or ""),
            namespace=str(resource.get("namespace") or ""),
            name=str(resource.get("name") or ""),
        )
    other = spec.get("nonResourceAttributes") or {}
    return Attributes(
        user,
        groups,
        verb=str(other.get("verb") or ""),
        path=str(other.get("path") or ""),
        resource_request=False,
    )


def _review(req: ResourceRequest, body: Any) -> Obj:
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request must be a JSON object")
    spec = body.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    return {
        "kind": req.rt.kind,
        "apiVersion": req.rt.api_version,
        "metadata": {**(meta or {}), "creationTimestamp": None},
        "spec": spec,
    }


class Reviews:
    def __init__(self, store: Store, authenticator: Authenticator) -> None:
        self.store = store
        self.authenticator = authenticator
        self.handlers: dict[str, ReviewHandler] = {
            TOKEN_REVIEWS: self.token_review,
            SUBJECT_ACCESS_REVIEWS: self.subject_access_review,
        }

    @staticmethod
    def _check(request: web.Request, req: ResourceRequest) -> None:
        if request.method != "POST" or req.name is not None:
            raise errors.method_not_allowed()

    async def token_review(self, request: web.Request, req: ResourceRequest) -> web.Response:
        self._check(request, req)
        review = _review(req, await read_json(request))
        token = review["spec"].get("token")
        if not isinstance(token, str) or not token:
            raise errors.bad_request("token is required for TokenReview in authentication")
        user = self.authenticator.authenticate(token)
        status: Obj = {"authenticated": user is not None, "user": {}}
        if user is not None:
            status["user"] = user.as_status()
            audiences = _strings(review["spec"].get("audiences"))
            if audiences:
                status["audiences"] = list(audiences)
        review["status"] = status
        return json_response(review, 201)

    async def subject_access_review(
        self, request: web.Request, req: ResourceRequest
    ) -> web.Response:
        self._check(request, req)
        review = _review(req, await read_json(request))
        spec = review["spec"]
        has_resource = isinstance(spec.get("resourceAttributes"), dict)
        has_other = isinstance(spec.get("nonResourceAttributes"), dict)
        causes: list[tuple[str, str, str]] = []
        if not has_resource and not has_other:
            causes.append(
                (
                    "spec.resourceAttributes",
                    "FieldValueRequired",
                    "Required value: exactly one of nonResourceAttributes or "
                    "resourceAttributes must be specified",
                )
            )
        elif has_resource and has_other:
            causes.append(
                (
                    "spec.nonResourceAttributes",
                    "FieldValueInvalid",
                    "Invalid value: cannot be specified in combination with resourceAttributes",
                )
            )
        if not spec.get("user") and not spec.get("groups"):
            causes.append(
                (
                    "spec.user",
                    "FieldValueInvalid",
                    'Invalid value: "": at least one of user or group must be specified',
                )
            )
        if causes:
            raise errors.invalid(req.rt, "", causes)
        decision = authorize(policy_of(self.store), attributes(spec))
        status: Obj = {"allowed": decision.allowed}
        if decision.reason:
            status["reason"] = decision.reason
        review["status"] = status
        return json_response(review, 201)
