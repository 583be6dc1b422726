"""``metav1.Status`` failure bodies, shaped exactly as kube-apiserver writes them.

Raised as ``ApiError`` by the store (in-process callers catch it) and turned into an HTTP
answer by the server. Message formats follow ``k8s.io/apimachinery/pkg/api/errors``:
``NewNotFound`` and ``NewAlreadyExists`` name the *resource* (``pods "x" not found``),
``NewInvalid`` names the *kind* (``Pod "x" is invalid: ...``).
"""

from __future__ import annotations

from typing import Any

from troupe.sim.apiserver.machinery.resources import ResourceType


class ApiError(Exception):
    """A request failed; ``status`` is the ``metav1.Status`` body to send."""

    def __init__(self, status: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        super().__init__(status.get("message", ""))
        self.status = status
        self.code: int = status["code"]
        self.reason: str = status.get("reason", "")
        self.headers = headers or {}


def status_failure(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def _details(group: str, kind: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = kind
    return details


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        status_failure(
            404,
            "NotFound",
            f'{rt.group_resource} "{name}" not found',
            _details(rt.group, rt.plural, name),
        )
    )


def namespace_not_found(name: str) -> ApiError:
    return ApiError(
        status_failure(
            404, "NotFound", f'namespaces "{name}" not found', _details("", "namespaces", name)
        )
    )


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        status_failure(
            409,
            "AlreadyExists",
            f'{rt.group_resource} "{name}" already exists',
            _details(rt.group, rt.plural, name),
        )
    )


def conflict(group_resource: str, group: str, resource: str, name: str, why: str) -> ApiError:
    """``errors.NewConflict``: ``Operation cannot be fulfilled on <gr> "<name>": <why>``."""
    return ApiError(
        status_failure(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {group_resource} "{name}": {why}',
            _details(group, resource, name),
        )
    )


def stale_conflict(rt: ResourceType, name: str) -> ApiError:
    return conflict(
        rt.group_resource,
        rt.group,
        rt.plural,
        name,
        "the object has been modified; please apply your changes to the latest version "
        "and try again",
    )


def storage_precondition_conflict(
    rt: ResourceType, namespace: str, name: str, want_uid: str, have_uid: str
) -> ApiError:
    """A failed storage-level UID precondition, as ``storeerr.InterpretUpdateError`` words it."""
    why = (
        f"StorageError: invalid object, Code: 4, Key: {rt.storage_key(namespace, name)}, "
        f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: "
        f"{want_uid}, UID in object meta: {have_uid}"
    )
    return conflict(rt.group_resource, rt.group, rt.plural, name, why)


def invalid(rt: ResourceType, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """``errors.NewInvalid``; each cause is (field, reason, message) as ``field.Error``."""
    qualified_kind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    text = ", ".join(f"{field}: {message}" for field, _, message in causes)
    if len(causes) > 1:
        text = "[" + text + "]"
    details = _details(rt.group, rt.kind, name)
    details["causes"] = [
        {"reason": reason, "message": message, "field": field} for field, reason, message in causes
    ]
    return ApiError(
        status_failure(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {text}', details)
    )


def bad_request(message: str) -> ApiError:
    return ApiError(status_failure(400, "BadRequest", message))


def forbidden(rt: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(
        status_failure(
            403,
            "Forbidden",
            f'{rt.group_resource} "{name}" is forbidden: {why}',
            _details(rt.group, rt.plural, name),
        )
    )


def too_large_resource_version(requested: int, current: int) -> ApiError:
    """``storage.NewTooLargeResourceVersionError``: a 504 Timeout asking the client to
    retry after a second, with the ``ResourceVersionTooLarge`` cause client-go's
    reflector recognizes (it relists)."""
    return ApiError(
        status_failure(
            504,
            "Timeout",
            f"Too large resource version: {requested}, current: {current}",
            {
                "causes": [
                    {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
                ],
                "retryAfterSeconds": 1,
            },
        )
    )


def expired(message: str) -> ApiError:
    return ApiError(status_failure(410, "Expired", message))


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(status_failure(405, "MethodNotAllowed", message, {}))


def not_found_path() -> ApiError:
    return ApiError(
        status_failure(404, "NotFound", "the server could not find the requested resource", {})
    )
