"""Google API errors as ``jobs.errors``, for every Google API the jobs call (GKE, Compute, later Cloud Quotas):
the google-api-core exceptions of the client libraries, google-auth's, and the transport's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import google.auth.exceptions as auth_exceptions
import requests
from google.api_core import exceptions as api_exceptions

from jobs.errors import Busy, CloudError, Conflict, Denied, Invalid, NotFound, Throttled, Unavailable

#: GKE's "another operation is running on the cluster" (400 FAILED_PRECONDITION over REST, not 409).
BUSY_REASON = "CLUSTER_ALREADY_HAS_OPERATION"
# 403 reasons that mean "slow down", not "not allowed" (Compute Engine rate quotas; RATE_LIMIT_EXCEEDED is the
# ErrorInfo spelling of newer APIs), and the words such a refusal carries when it has no reason ("Quota exceeded for
# quota metric 'Queries' and limit 'Queries per minute' ..."): never a permission refusal.
_RATE_LIMIT_WORDS = "Quota exceeded for quota metric"
_RATE_LIMIT_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"})

#: google.rpc.Code of a failed long-running operation -> our error; anything else counts as Unavailable (it may
#: work later).
RPC_CODE_ERRORS: dict[int, type[CloudError]] = {
    3: Invalid,  # INVALID_ARGUMENT
    5: NotFound,
    6: Conflict,  # ALREADY_EXISTS
    7: Denied,  # PERMISSION_DENIED
    9: Invalid,  # FAILED_PRECONDITION
    10: Conflict,  # ABORTED
    16: Denied,  # UNAUTHENTICATED
}
RESOURCE_EXHAUSTED = 8  # google.rpc.Code


@contextmanager
def translated(operation: str, target: str) -> Iterator[None]:
    """Turn every SDK, auth and transport error into ``jobs.errors``: nothing from the SDK escapes."""
    try:
        yield
    except api_exceptions.GoogleAPICallError as err:
        raise from_api_error(err, operation, target) from err
    except api_exceptions.GoogleAPIError as err:  # RetryError and friends
        raise Unavailable(f"{target}: {err}", operation=operation, code=type(err).__name__) from err
    except (requests.exceptions.RequestException, auth_exceptions.TransportError) as err:
        # The REST transport does not wrap these: a client-side timeout or a refused connection.
        raise Unavailable(f"{target}: {err}", operation=operation, code=type(err).__name__) from err
    except auth_exceptions.GoogleAuthError as err:
        raise Denied(f"{target}: credentials: {err}", operation=operation, code=type(err).__name__) from err


def from_api_error(err: api_exceptions.GoogleAPICallError, operation: str, target: str) -> CloudError:
    """``code`` is the ErrorInfo reason, else the google.rpc status name, else the HTTP status; ``status`` the HTTP
    status; ``retry_after_s`` the ``Retry-After`` the server sent, if any."""
    status = _rpc_status(err)
    reason = err.reason or ""
    code = reason or status or str(err.code)
    kind: type[CloudError] = Invalid  # 400 INVALID_ARGUMENT, other FAILED_PRECONDITION
    # The ErrorInfo reason is the contract; the message check covers answers that carry no ErrorInfo.
    limited = sorted(_RATE_LIMIT_REASONS.intersection(_reasons(err)))
    if reason == BUSY_REASON or BUSY_REASON in err.message or "running incompatible operation" in err.message:
        kind, code = Busy, BUSY_REASON
    elif isinstance(err, api_exceptions.Forbidden) and (limited or _RATE_LIMIT_WORDS in err.message):
        # Compute Engine (and GKE's v1 API) answer a rate limit with 403, not 429: the reason tells it from a
        # real permission refusal, which stays Denied.
        kind, code = Throttled, (limited or ["rateLimitExceeded"])[0]
    else:
        kind = next((ours for sdk_error, ours in _KINDS if isinstance(err, sdk_error)), Invalid)
    return kind(
        f"{target}: {err.message}",
        operation=operation,
        code=code,
        status=int(err.code or 0),
        reason=reason,
        retry_after_s=_retry_after(err),
    )


_KINDS: list[tuple[type[api_exceptions.GoogleAPICallError], type[CloudError]]] = [
    (api_exceptions.TooManyRequests, Throttled),  # 429 RESOURCE_EXHAUSTED
    (api_exceptions.ServerError, Unavailable),  # 5xx incl. 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED
    (api_exceptions.NotFound, NotFound),
    (api_exceptions.Forbidden, Denied),
    (api_exceptions.Unauthorized, Denied),
    (api_exceptions.Conflict, Conflict),  # 409 ABORTED / ALREADY_EXISTS
    (api_exceptions.PreconditionFailed, Conflict),  # 412: a stale fingerprint/etag
]


def _retry_after(err: api_exceptions.GoogleAPICallError) -> float | None:
    response = err.response
    value = response.headers.get("Retry-After", "") if isinstance(response, requests.Response) else ""
    return float(value) if value.strip().isdigit() else None


def _reasons(err: api_exceptions.GoogleAPICallError) -> set[str]:
    """Every reason the error carries: the ErrorInfo one and those of the legacy ``errors`` list."""
    found = {err.reason} if err.reason else set()
    for item in err.errors or ():
        reason = item.get("reason") if isinstance(item, dict) else None
        if isinstance(reason, str):
            found.add(reason)
    return found


def _rpc_status(err: api_exceptions.GoogleAPICallError) -> str:
    """The google.rpc status name from the REST error body (``FAILED_PRECONDITION``), if there is one."""
    response = err.response
    if not isinstance(response, requests.Response):
        return ""
    try:
        body = response.json()
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    status = error.get("status") if isinstance(error, dict) else None
    return status if isinstance(status, str) else ""
