"""azure-core's errors as ``jobs.errors``, for every ARM API the jobs call (AKS, later Quota and Compute)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from azure.core.exceptions import AzureError, ClientAuthenticationError, HttpResponseError, ResourceNotFoundError

from jobs.errors import Busy, CloudError, Conflict, Denied, Invalid, NotFound, Throttled, Unavailable

T = TypeVar("T")


def arm_code(error: AzureError) -> str:
    """ARM's error code (``OperationNotAllowed``, ``AllocationFailed``...), else the HTTP status or the type."""
    if isinstance(error, HttpResponseError):
        return (error.error.code if error.error else None) or str(error.status_code or type(error).__name__)
    return type(error).__name__


def message(error: AzureError) -> str:
    if isinstance(error, HttpResponseError) and error.error is not None and error.error.message:
        return str(error.error.message)
    return str(error.message or error)


def translate(error: AzureError, operation: str, where: str) -> CloudError:
    """An azure-core exception as one of ``jobs.errors``; ``code`` is ARM's error code where there is one,
    ``status`` the HTTP status, ``retry_after_s`` ARM's ``Retry-After``."""
    text = f"{where}: {operation}: {message(error)}"
    code = arm_code(error)
    if not isinstance(error, HttpResponseError):
        # ServiceRequestError / ServiceResponseError (connection failures, timeouts) and anything else from
        # azure-core that carries no HTTP answer: the call may or may not have happened.
        return Unavailable(text, operation=operation, code=code)
    status = error.status_code or 0
    kind: type[CloudError]
    if status == 409:
        # AKS's busy signal; any other 409 is a genuine conflict.
        kind = Busy if code == "OperationNotAllowed" else Conflict
    elif status == 412:
        kind = Conflict
    elif status == 429:
        kind = Throttled
    elif status in (401, 403) or isinstance(error, ClientAuthenticationError):
        kind = Denied
    elif status == 404 or isinstance(error, ResourceNotFoundError):
        kind = NotFound
    elif 400 <= status < 500 and status != 408:
        kind = Invalid
    else:
        # 5xx, 408, and a long-running operation that ended Failed/Canceled (reported on a 2xx status poll):
        # ARM's writes are declarative, so trying again later is safe.
        kind = Unavailable
    return kind(text, operation=operation, code=code, status=status, retry_after_s=_retry_after(error))


Translate = Callable[[AzureError, str, str], CloudError]


def call(where: str, operation: str, fn: Callable[[], T], *, translate: Translate = translate) -> T:
    """``fn()`` with every azure-core error translated (``where`` names the resource in the message); a use module
    with its own reading of some codes passes its ``translate``, which falls back to this module's."""
    try:
        return fn()
    except AzureError as error:
        raise translate(error, operation, where) from error


def _retry_after(error: HttpResponseError) -> float | None:
    """ARM's ``Retry-After`` (whole seconds), or the millisecond headers some Azure services send instead."""
    headers = getattr(error.response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 1000.0), ("x-ms-retry-after-ms", 1000.0), ("Retry-After", 1.0)):
        value = str(headers.get(name, "")).strip()
        if value.isdigit():
            return int(value) / scale
    return None
