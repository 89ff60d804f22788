"""What a Google REST API request and response look like on the wire, shared by GKE, Cloud Quotas and Compute.

Bodies are parsed and rendered with the proto-plus message types the SDKs ship, so field names, proto3 JSON
rules (camelCase, int64 as strings, zero values omitted) and unknown-field rejection come from the real API
definitions rather than from hand-written dicts.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import parse_qs

from google.protobuf.json_format import ParseError

from tests.emulators.base import FaultKind

M = TypeVar("M")


@dataclass(frozen=True)
class Call:
    """One parsed request: what a route handler needs, nothing WSGI-specific."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    body: bytes

    @classmethod
    def make(cls, method: str, path: str, query_string: str, body: bytes) -> Call:
        return cls(method, path, parse_qs(query_string, keep_blank_values=True), body)

    def arg(self, name: str, default: str = "") -> str:
        values = self.query.get(name)
        return values[0] if values else default

    def flag(self, name: str) -> bool:
        return self.arg(name).lower() == "true"

    @property
    def int_enums(self) -> bool:
        # The GKE and Cloud Quotas REST transports send `$alt=json;enum-encoding=int`; the real server then
        # answers enums as numbers. Compute sends no such parameter and gets names.
        return "enum-encoding=int" in self.arg("$alt")

    def parse(self, message_type: type[M], *, compute: bool = False) -> M:
        text = self.body.decode() or "{}"
        try:
            return message_type.from_json(text, ignore_unknown_fields=False)  # type: ignore[attr-defined,no-any-return]
        except (ParseError, ValueError) as err:
            message = f"Invalid JSON payload received. {err}"
            if compute:
                raise ComputeError(400, "invalid", message) from err
            raise GoogleError(400, "INVALID_ARGUMENT", message) from err


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]


def proto_reply(message: Any, call: Call, status: int = 200) -> Reply:
    """Render a proto-plus message as the real server does: proto3 JSON that omits default values."""
    text = type(message).to_json(
        message,
        use_integers_for_enums=call.int_enums,
        always_print_fields_with_no_presence=False,
        indent=None,
    )
    return Reply(status, json.loads(text))


class ApiError(Exception):
    """An error answer; each cloud family renders its own body shape."""

    status_code: int

    def body(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass
class GoogleError(ApiError):
    """The google.rpc.Status JSON shape used by GKE (container v1) and Cloud Quotas."""

    status_code: int
    status: str
    message: str
    reason: str | None = None
    domain: str = "googleapis.com"
    metadata: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(f"{self.status_code} {self.status}: {self.message}")

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.status_code, "message": self.message, "status": self.status}
        if self.reason:
            error["details"] = [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": self.reason,
                    "domain": self.domain,
                    "metadata": self.metadata,
                }
            ]
        return {"error": error}


@dataclass
class ComputeError(ApiError):
    """Compute Engine's own error shape: code, message and a legacy `errors` list with a reason."""

    status_code: int
    reason: str
    message: str
    domain: str = "global"

    def __post_init__(self) -> None:
        super().__init__(f"{self.status_code} {self.reason}: {self.message}")

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "code": self.status_code,
                "message": self.message,
                "errors": [{"message": self.message, "domain": self.domain, "reason": self.reason}],
            }
        }


#: The 403 reasons Google's APIs answer a rate limit with (Compute Engine: "you receive a 403 error with the
#: reason rateLimitExceeded"); a 403 with any other reason is a real permission refusal.
RATE_LIMIT_REASONS = ("rateLimitExceeded", "userRateLimitExceeded")


def rate_limit_403(reason: str = "rateLimitExceeded") -> ComputeError:
    """A rate limit as Compute Engine (and GKE's v1 API, in the same legacy shape) answer it: HTTP 403, not 429."""
    if reason not in RATE_LIMIT_REASONS:
        raise ValueError(f"not a rate-limit reason: {reason}")
    message = "User Rate Limit Exceeded" if reason == "userRateLimitExceeded" else "Rate Limit Exceeded"
    return ComputeError(403, reason, message, domain="usageLimits")


def permission_403(permission: str) -> GoogleError:
    """A real permission refusal: 403 PERMISSION_DENIED with ErrorInfo IAM_PERMISSION_DENIED."""
    return GoogleError(
        403,
        "PERMISSION_DENIED",
        f"Permission '{permission}' denied on resource (or it may not exist).",
        reason="IAM_PERMISSION_DENIED",
        domain="iam.googleapis.com",
        metadata={"permission": permission},
    )


def google_fault(kind: FaultKind, operation: str, busy: Callable[[], GoogleError]) -> GoogleError:
    """An injected fault as GKE or Cloud Quotas put it on the wire."""
    if kind == "throttle":
        return GoogleError(
            429,
            "RESOURCE_EXHAUSTED",
            f"Quota exceeded for quota metric 'Requests' of service for method {operation}.",
            reason="RATE_LIMIT_EXCEEDED",
        )
    if kind == "server_error":
        return GoogleError(503, "UNAVAILABLE", "The service is currently unavailable.")
    if kind == "timeout":
        return GoogleError(504, "DEADLINE_EXCEEDED", "Deadline exceeded.")
    if kind == "conflict":
        if operation.endswith(".create"):
            return GoogleError(409, "ALREADY_EXISTS", "Resource already exists.")
        return GoogleError(409, "ABORTED", "The operation was aborted due to a concurrent modification.")
    return busy()


def compute_fault(kind: FaultKind, target: str) -> ComputeError:
    """An injected fault as Compute Engine puts it on the wire."""
    if kind == "throttle":
        return ComputeError(429, "rateLimitExceeded", "Rate Limit Exceeded")
    if kind == "server_error":
        return ComputeError(503, "backendError", "Backend Error")
    if kind == "timeout":
        return ComputeError(504, "timeout", "Deadline exceeded")
    if kind == "conflict":
        return ComputeError(409, "conflict", f"The resource '{target}' is in conflict with another operation")
    return ComputeError(400, "resourceNotReady", f"The resource '{target}' is not ready")


def rfc3339_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def operation_id() -> str:
    """The shape GKE and Compute use: `operation-<epoch millis>-<hex>`."""
    return f"operation-{int(time.time() * 1000)}-{secrets.token_hex(4)}"


def new_etag() -> str:
    return secrets.token_urlsafe(12)


_PAGE_TOKEN = re.compile(r"^o(\d+)$")


def page(items: list[M], call: Call, *, compute: bool = False) -> tuple[list[M], str]:
    """Offset paging: the token is opaque to the client, which is all the real API promises."""
    token = call.arg("pageToken")
    start = 0
    if token:
        matched = _PAGE_TOKEN.match(token)
        if not matched:
            message = f"Invalid page token {token!r}."
            if compute:
                raise ComputeError(400, "invalid", message)
            raise GoogleError(400, "INVALID_ARGUMENT", message)
        start = int(matched.group(1))
    size_text = call.arg("maxResults" if compute else "pageSize")
    size = int(size_text) if size_text.isdigit() and int(size_text) > 0 else len(items) or 1
    chunk = items[start : start + size]
    end = start + size
    return chunk, (f"o{end}" if end < len(items) else "")


Handler = Callable[[Call, re.Match[str]], Reply]


@dataclass(frozen=True)
class Route:
    """One REST method: HTTP verb, path pattern, the operation name used by the log and faults, handler."""

    method: str
    pattern: re.Pattern[str]
    operation: str
    handler: Handler


def route(method: str, pattern: str, operation: str, handler: Handler) -> Route:
    return Route(method, re.compile(f"^{pattern}$"), operation, handler)


#: One path segment (a resource id); ':' ends it because custom methods are `name:verb`.
SEG = r"[^/:]+"
