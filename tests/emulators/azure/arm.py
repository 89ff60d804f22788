"""Azure Resource Manager wire conventions shared by the AKS, Quota and Compute routes.

ARM answers errors as ``{"error": {"code", "message", "target"?}}``; azure-core turns the status into an
exception class (404 -> ResourceNotFoundError, 409 -> ResourceExistsError, 401 -> ClientAuthenticationError,
anything else -> HttpResponseError) and exposes the body as ``exc.error.code`` / ``exc.error.message``.

Long-running operations are announced with an ``Azure-AsyncOperation`` header (a status monitor answering
``{"status": "InProgress" | "Succeeded" | "Failed" | "Canceled"}``) and/or a ``Location`` header, plus a
retry-after header that azure-core's ``ARMPolling`` sleeps before the next poll.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from werkzeug.wrappers import Request, Response

from tests.emulators.base import FaultKind

OperationStatus = Literal["InProgress", "Succeeded", "Failed", "Canceled"]
TERMINAL: frozenset[str] = frozenset({"Succeeded", "Failed", "Canceled"})


class ArmError(Exception):
    """An ARM error response; raise it from a handler and the app renders it."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        target: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.target = target
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.target:
            error["target"] = self.target
        return {"error": error}


def now_iso() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def new_request_id() -> str:
    return str(uuid.uuid4())


def json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    response = Response(json.dumps(body), status=status, content_type="application/json; charset=utf-8")
    response.headers["x-ms-request-id"] = new_request_id()
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def empty_response(status: int, headers: Mapping[str, str] | None = None) -> Response:
    response = Response(b"", status=status)
    response.headers["x-ms-request-id"] = new_request_id()
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def error_response(error: ArmError) -> Response:
    return json_response(error.body(), error.status, error.headers)


def retry_after_headers(seconds: float) -> dict[str, str]:
    """The header that tells azure-core how long to wait before polling (or retrying) again.

    ARM sends ``Retry-After`` in whole seconds, and that is what we send for values >= 1 s. Two traps in
    azure-core 1.41 (``polling.base_polling._extract_delay`` and ``pipeline.policies._utils.get_retry_after``):
    ``Retry-After: 0`` is falsy and falls back to the client's ``polling_interval`` (30 s by default), and only
    integers are valid HTTP. For sub-second delays we therefore send ``retry-after-ms``, the millisecond
    header azure-core also honours (other Azure services send it), so the product's pollers run unchanged
    and fast: no test-only branch in product code.
    """
    if seconds >= 1 and float(seconds).is_integer():
        return {"Retry-After": str(int(seconds))}
    return {"retry-after-ms": str(max(1, round(seconds * 1000)))}


def fault_error(kind: FaultKind, operation: str, retry_after_s: float) -> ArmError:
    """How ARM reports each injected fault on the wire."""
    if kind == "throttle":
        return ArmError(
            429,
            "TooManyRequests",
            f"The request for '{operation}' was throttled. Please retry after the time in the Retry-After header.",
            headers=retry_after_headers(retry_after_s),
        )
    if kind == "server_error":
        return ArmError(500, "InternalServerError", "Encountered internal server error. Please try again.")
    if kind == "busy":
        aks = operation.startswith(("agentPools.", "managedClusters.", "containerService."))
        return ArmError(
            409,
            "OperationNotAllowed",
            "Operation is not allowed: Another operation is in progress, please wait for it to finish "
            "before starting a new operation."
            + (" See https://aka.ms/aks-pending-operation for more details" if aks else ""),
        )
    if kind == "conflict":
        return ArmError(409, "Conflict", f"The request for '{operation}' conflicts with the current state.")
    # timeout: the base already held the request past the client's read timeout; the gateway gives up too.
    return ArmError(504, "GatewayTimeout", "The gateway did not receive a response within the specified time.")


@dataclass
class RequestContext:
    """What a route handler needs from the HTTP request."""

    request: Request
    #: scheme://host[:port] as the client addressed us: status-monitor URLs must point back at the emulator.
    origin: str

    @property
    def api_version(self) -> str:
        return self.request.args.get("api-version", "")

    def json(self) -> dict[str, Any]:
        raw = self.request.get_data()
        if not raw:
            return {}
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise ArmError(400, "InvalidRequestContent", f"The request content was invalid: {exc}") from exc
        if not isinstance(body, dict):
            raise ArmError(400, "InvalidRequestContent", "The request content must be a JSON object.")
        return body

    def absolute(self, path: str) -> str:
        """A URL on this emulator carrying the caller's api-version, as ARM's monitor URLs do."""
        return f"{self.origin}{path}?api-version={self.api_version}"


def paged(ctx: RequestContext, items: list[dict[str, Any]], page_size: int | None) -> dict[str, Any]:
    """ARM list shape: ``value`` plus ``nextLink`` (an absolute URL with ``$skiptoken``) when more remain."""
    start = int(ctx.request.args.get("$skiptoken", "0") or 0)
    if page_size is None:
        return {"value": items[start:]}
    end = start + page_size
    body: dict[str, Any] = {"value": items[start:end]}
    if end < len(items):
        args = {k: v for k, v in ctx.request.args.items() if k != "$skiptoken"}
        args["$skiptoken"] = str(end)
        query = "&".join(f"{k}={v}" for k, v in args.items())
        body["nextLink"] = f"{ctx.origin}{ctx.request.path}?{query}"
    return body


@dataclass
class AsyncOperation:
    """One long-running operation. Its effect is applied when it reaches Succeeded, never before."""

    id: str
    kind: str
    target: str
    #: Test-only: status polls still to answer InProgress before it completes; ``None`` (the default): polls do
    #: not count, only time (``finish_at``) or :meth:`finish` ends it.
    polls_left: int | None
    on_succeeded: Callable[[], None]
    on_failed: Callable[[], None]
    status: OperationStatus = "InProgress"
    error: ArmError | None = None
    #: Monotonic instant at which the operation completes whether or not anyone polls it (a real one finishes on its
    #: own: a client whose answer was lost never polls); ``None``: held until :meth:`finish` (or polls, if counted).
    finish_at: float | None = None
    start_time: str = field(default_factory=now_iso)
    end_time: str | None = None
    #: Asked when the operation would succeed: an error makes it end Failed instead (capacity, quota).
    outcome: Callable[[], ArmError | None] | None = None

    @property
    def running(self) -> bool:
        return self.status not in TERMINAL

    def poll(self) -> None:
        """A client looked at the status: count it, and complete the operation when its polls are spent."""
        if not self.running or self.polls_left is None:
            return
        if self.polls_left > 0:
            self.polls_left -= 1
            return
        self.complete()

    def complete(self) -> None:
        """End the operation as it runs out: Succeeded, unless its ``outcome`` says why it fails."""
        error = self.outcome() if self.outcome is not None else None
        if error is not None:
            self.finish("Failed", error)
        else:
            self.finish("Succeeded")

    def finish(self, status: OperationStatus, error: ArmError | None = None) -> None:
        if not self.running:
            return
        self.status = status
        self.end_time = now_iso()
        if status == "Succeeded":
            self.on_succeeded()
        else:
            self.error = error or ArmError(
                400, "OperationFailed", f"The operation '{self.kind}' on '{self.target}' failed."
            )
            self.on_failed()

    def status_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"name": self.id, "status": self.status, "startTime": self.start_time}
        if self.end_time:
            body["endTime"] = self.end_time
        if self.error is not None:
            body["error"] = self.error.body()["error"]
        return body


@dataclass
class AsyncOperations:
    """Every long-running operation an emulator started, by id. Callers hold the emulator's lock.

    ``wake_at`` (the emulator's :meth:`~tests.emulators.base.Emulator.wake_at`) is told each deadline, so an
    operation completes on time even if no request comes."""

    _by_id: dict[str, AsyncOperation] = field(default_factory=dict)
    wake_at: Callable[[float], None] = lambda deadline: None

    @staticmethod
    def now() -> float:
        """The clock deadlines are measured on (monotonic, as the emulator's)."""
        return time.monotonic()

    def start(
        self,
        kind: str,
        target: str,
        polls: int | None,
        on_succeeded: Callable[[], None],
        on_failed: Callable[[], None],
        seconds: float | None = None,
    ) -> AsyncOperation:
        operation = AsyncOperation(str(uuid.uuid4()), kind, target, polls, on_succeeded, on_failed)
        if seconds is not None:
            operation.finish_at = self.now() + seconds
            self.wake_at(operation.finish_at)
        self._by_id[operation.id] = operation
        return operation

    def settle(self) -> None:
        """Finish the operations whose time is up (callers hold the emulator's lock)."""
        now = self.now()
        for operation in self.running():
            if operation.finish_at is not None and operation.finish_at <= now:
                operation.complete()

    def get(self, operation_id: str) -> AsyncOperation | None:
        return self._by_id.get(operation_id.lower()) or self._by_id.get(operation_id)

    def running(self, target_prefix: str = "") -> list[AsyncOperation]:
        prefix = target_prefix.lower()
        return [op for op in self._by_id.values() if op.running and op.target.lower().startswith(prefix)]

    def all(self) -> list[AsyncOperation]:
        return list(self._by_id.values())


Handler = Callable[[RequestContext, dict[str, str]], Response]


@dataclass(frozen=True)
class Route:
    """One ARM operation: method, a path regex with named groups (matched case-insensitively, as ARM
    matches provider and resource-type names), the operation name used by the log and faults, a handler."""

    method: str
    pattern: str
    operation: str
    handler: Handler


class Host(Protocol):
    """What a service module needs from the emulator that serves it (live settings, shared registry)."""

    operations: AsyncOperations
    #: Test-only: status polls answering InProgress before an operation completes; ``None``: polls do not count.
    operation_polls: int | None
    #: An operation completes this long after it started, polled or not; ``None`` holds it until finished by hand.
    operation_seconds: float | None
    #: Delay announced in retry-after headers of LRO and 429 responses.
    retry_after_s: float
    #: Items per page in list responses; ``None`` answers everything in one page.
    page_size: int | None
