"""botocore's errors as ``jobs.errors``: one table of AWS error codes for every AWS service the jobs call (EKS, Auto
Scaling, EC2, and later Service Quotas), so each use module only says what its own calls mean."""

from __future__ import annotations

from botocore.exceptions import (  # type: ignore[import-untyped]
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    ParamValidationError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from jobs.errors import Busy, CloudError, Denied, Invalid, NotFound, Throttled, Unavailable

_THROTTLED = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "SlowDown",
    }
)
_UNAVAILABLE = frozenset(
    {"ServiceUnavailable", "ServiceUnavailableException", "InternalFailure", "InternalError", "ServerException"}
)
# ScalingActivityInProgress / ResourceContention: Auto Scaling's "another change is running, try again".
_BUSY = frozenset({"ResourceInUseException", "ScalingActivityInProgress", "ResourceContention"})
_NOT_FOUND = frozenset(
    {
        "ResourceNotFoundException",
        "NotFoundException",
        "InvalidLaunchTemplateId.NotFound",
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.VersionNotFound",
    }
)
_INVALID = frozenset(
    {
        "InvalidParameterException",
        "InvalidParameterValue",
        "InvalidParameterCombination",
        "InvalidRequestException",
        "ValidationError",
        "ValidationException",
        "LimitExceeded",
    }
)
_DENIED_PREFIXES = ("AccessDenied", "UnauthorizedOperation", "UnrecognizedClient", "InvalidClientTokenId", "Expired")


def translate(error: Exception, operation: str) -> CloudError:
    """The ``jobs.errors`` exception for a botocore error; ``code`` is AWS's error code, ``status`` the HTTP one."""
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        message = str(error.response.get("Error", {}).get("Message", "")) or str(error)
        text = f"{operation}: {code}: {message}"
        kind: type[CloudError]
        if code in _THROTTLED:
            kind = Throttled
        elif code in _BUSY:
            kind = Busy
        elif code in _NOT_FOUND or (code == "ValidationError" and "not found" in message.lower()):
            # Auto Scaling reports an unknown group name as ValidationError "... name not found".
            kind = NotFound
        elif code.startswith(_DENIED_PREFIXES):
            kind = Denied
        elif code in _UNAVAILABLE or status >= 500:
            kind = Unavailable
        else:
            kind = Invalid  # _INVALID and anything else AWS refused
        return kind(text, operation=operation, code=code or str(status), status=status)
    if isinstance(error, BotoConnectionError | HTTPClientError):
        # Connection refused/reset, connect or read timeout: the call may or may not have happened.
        return Unavailable(f"{operation}: {error}", operation=operation, code=type(error).__name__)
    if isinstance(error, ParamValidationError):
        return Invalid(f"{operation}: {error}", operation=operation, code="ParamValidationError")
    if isinstance(error, NoCredentialsError):
        return Denied(f"{operation}: {error}", operation=operation, code="NoCredentials")
    return Unavailable(f"{operation}: {error}", operation=operation, code=type(error).__name__)
