"""API errors as the kube-apiserver puts them on the wire: an HTTP code plus a ``Status`` body.

Clients (``kubernetes`` Python client, kubectl, client-go) branch on ``code`` and ``reason``, and show ``message``,
so the texts below copy the real server's wording.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Json = dict[str, Any]


class ApiError(Exception):
    """Raised anywhere in the emulator; the WSGI layer renders it as a failed ``Status``."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Json | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> Json:
        body: Json = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(resource: str, group: str, name: str, **extra: Any) -> Json:
    details: Json = {"name": name, "kind": resource} if name else {"kind": resource}
    if group:
        details["group"] = group
    details.update(extra)
    return details


def qualified(resource: str, group: str) -> str:
    """``pods`` or ``leases.coordination.k8s.io``: how the server names a resource in messages."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{qualified(resource, group)} "{name}" not found', _details(resource, group, name)
    )


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409, "AlreadyExists", f'{qualified(resource, group)} "{name}" already exists', _details(resource, group, name)
    )


def conflict(resource: str, group: str, name: str, why: str) -> ApiError:
    message = f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}'
    return ApiError(409, "Conflict", message, _details(resource, group, name))


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def stale(resource: str, group: str, name: str) -> ApiError:
    return conflict(resource, group, name, STALE)


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422. ``causes`` are ``(reason, field, message)``, e.g. ``("FieldValueRequired", "spec.containers",
    "Required value")``; the message lists them the way field.ErrorList does."""
    rendered = [f"{field}: {message}" for _, field, message in causes]
    summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    details = _details(kind, group, name, causes=[{"reason": r, "message": m, "field": f} for r, f, m in causes])
    return ApiError(422, "Invalid", f'{qualified(kind, group)} "{name}" is invalid: {summary}', details)


def forbidden(resource: str, group: str, name: str, why: str) -> ApiError:
    message = f'{qualified(resource, group)} "{name}" is forbidden: {why}'
    return ApiError(403, "Forbidden", message, _details(resource, group, name))


def namespace_terminating(resource: str, group: str, name: str, namespace: str) -> ApiError:
    """NamespaceLifecycle admission: nothing new is created in a namespace that is being deleted."""
    why = f"unable to create new content in namespace {namespace} because it is being terminated"
    cause = {
        "reason": "NamespaceTerminating",
        "message": f"namespace {namespace} is being terminated",
        "field": "metadata.namespace",
    }
    details = _details(resource, group, name, causes=[cause])
    return ApiError(403, "Forbidden", f'{qualified(resource, group)} "{name}" is forbidden: {why}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message, {})


def unsupported_media_type(accepted: Iterable[str]) -> ApiError:
    message = f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}"
    return ApiError(415, "UnsupportedMediaType", message)


def not_acceptable(accepted: Iterable[str]) -> ApiError:
    return ApiError(406, "NotAcceptable", f"only the following media types are accepted: {', '.join(accepted)}")


def too_many_requests(message: str, retry_after_s: int = 1, causes: list[Json] | None = None) -> ApiError:
    """429; ``retry_after_s`` 0 means no ``Retry-After`` (the eviction refusal has none)."""
    details: Json = {"retryAfterSeconds": retry_after_s} if retry_after_s else {}
    if causes:
        details["causes"] = causes
    headers = {"Retry-After": str(retry_after_s)} if retry_after_s else {}
    return ApiError(429, "TooManyRequests", message, details, headers)


def internal_error(why: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {why}", {"causes": [{"message": why}]})


def gateway_timeout() -> ApiError:
    message = "Timeout: request did not complete within requested timeout - context deadline exceeded"
    return ApiError(504, "Timeout", message, {})
