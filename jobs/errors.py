"""The project's own exceptions, under one root, so the runner and the CLI catch by layer:

    GpuJobsError
    ├── ConfigError     bad policy or settings: nothing may change (exit 2)   SettingsError, PolicyError
    ├── Stopped         the run may not write any more (a stop request, the Lease lost)
    ├── DeadlineReached the run's deadline ended a wait or a write not yet started: that item fails (exit 1)
    └── CloudError      an outside system (a cloud, a Kubernetes API) failed: that item fails (exit 1)
        ├── NotFound, Conflict, Denied, Invalid, OutcomeUnknown, NotDelivered
        └── Busy, Throttled, Unavailable   (retryable)

Adapters translate SDK errors into these, so nothing above the adapters knows which SDK raised what.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Cause:
    """One reason an API gave for a refusal (a Kubernetes ``Status`` cause: which field, and what is wrong with it)."""

    reason: str = ""
    field: str = ""
    message: str = ""


class GpuJobsError(Exception):
    """Every error this project raises on purpose; anything else is a bug."""


class ConfigError(GpuJobsError):
    """The policy or the run's settings cannot be used: nothing is changed anywhere (exit 2)."""


class Stopped(GpuJobsError):
    """The run may not start another write: it was asked to stop (SIGTERM, Ctrl-C), or lost its Lease."""

    def __init__(self, message: str, *, why: str = "") -> None:
        super().__init__(message)
        self.why = why or message  # the reason alone, for a message that says what was done before it


class DeadlineReached(GpuJobsError):
    """The run's deadline (``jobs.deadline``) ended a wait, a retry or a write not yet started. Neither a cloud error
    (nothing retries it) nor a stop request: the item fails with a reason starting ``deadline:``, and the run still
    undoes what is temporary and reports."""


class CloudError(GpuJobsError):
    """An API call failed. ``retryable`` errors are retried with backoff until a deadline.

    Besides the message: ``code`` is the API's own error code (or the HTTP status), ``status`` the HTTP status (0
    when there was no answer), ``reason`` the API's machine-readable reason (``AlreadyExists``, ``Expired``...),
    ``causes`` what the API said about each field, and ``retry_after_s`` how long the API asked the caller to wait
    (``Retry-After``) before trying again, so a backoff can wait at least that long."""

    retryable = False

    def __init__(
        self,
        message: str,
        *,
        operation: str = "",
        code: str = "",
        status: int = 0,
        reason: str = "",
        causes: Sequence[Cause] = (),
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.operation = operation
        self.code = code
        self.status = status
        self.reason = reason
        self.causes = tuple(causes)
        self.retry_after_s = retry_after_s


class NotFound(CloudError):
    pass


class Conflict(CloudError):
    """Optimistic concurrency lost (stale resourceVersion, etag) or the object already exists."""


class Busy(CloudError):
    """Another operation is running on the resource (EKS ResourceInUse, GKE CLUSTER_ALREADY_HAS_OPERATION,
    AKS OperationNotAllowed)."""

    retryable = True


class Throttled(CloudError):
    retryable = True


class Unavailable(CloudError):
    """5xx or a timeout: the call may or may not have happened, so only idempotent calls are retried."""

    retryable = True


class OutcomeUnknown(CloudError):
    """A write was sent and its answer was lost (timeout, connection reset, 5xx after the request was read): it may
    or may not have been applied. Never resent blindly: observe again and decide, or resend only with a stable
    idempotency token (EKS ``clientRequestToken``) or when the write is idempotent by nature."""


class Denied(CloudError):
    """Not allowed: missing permission, or a provider rule (e.g. an AKS system pool cannot go to zero)."""


class Invalid(CloudError):
    """The provider refused the request as malformed or against its rules."""


class NotDelivered(CloudError):
    """The provider accepted a scale-up but could not bring the nodes (a stockout, a quota, no free addresses).
    Not retried within a run: it does not clear in seconds, and resending a size already set changes nothing."""
