"""What an AWS request and an AWS error look like on the wire, per protocol.

The emulator has to tell which service and operation a request is for before it can log it, inject a fault
or extend moto. AWS encodes that three ways, and botocore's own service models say which one a service uses:

- ``json`` (Service Quotas): ``X-Amz-Target: ServiceQuotasV20190624.GetServiceQuota``;
- ``query`` / ``ec2`` (Auto Scaling, EC2): form field ``Action=UpdateAutoScalingGroup``;
- ``rest-json`` (EKS): HTTP method + request path, matched against the model's ``requestUri`` templates.

The service itself comes from the SigV4 credential scope (``Credential=AKID/20240101/us-east-1/eks/aws4_request``),
as it does for moto's own dispatcher; its signing name is also the IAM action prefix.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit
from xml.sax.saxutils import escape

import botocore.session
from botocore.model import ServiceModel

from tests.emulators.base import FaultKind

#: SigV4 signing name -> botocore service name, for the services the emulator knows how to parse.
SIGNING_TO_SERVICE = {
    "eks": "eks",
    "autoscaling": "autoscaling",
    "ec2": "ec2",
    "servicequotas": "service-quotas",
    "sts": "sts",
    "iam": "iam",
}

_CREDENTIAL_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request")


@dataclass(frozen=True)
class Reply:
    """A complete HTTP response, ready for ``start_response``."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""


@dataclass(frozen=True)
class AwsCall:
    """One identified AWS API request."""

    service: str  # SigV4 signing name == IAM prefix: "eks", "autoscaling", "ec2", "servicequotas"
    region: str
    operation: str  # AWS operation name, e.g. "UpdateNodegroupConfig"; "" if not recognised
    protocol: str  # botocore protocol of the service: "json", "rest-json", "query", "ec2"
    method: str
    path: str  # raw (still percent-encoded) path
    query: str
    body: bytes
    path_params: dict[str, str] = field(default_factory=dict)  # rest-json URI labels, decoded

    @property
    def iam_action(self) -> str:
        return f"{self.service}:{self.operation}"

    def json_body(self) -> dict[str, Any]:
        if not self.body:
            return {}
        parsed = json.loads(self.body)
        return parsed if isinstance(parsed, dict) else {}

    def query_params(self) -> dict[str, list[str]]:
        return parse_qs(self.query, keep_blank_values=True)

    def form(self) -> dict[str, list[str]]:
        """Query-protocol parameters: the form body of a POST, else the query string."""
        return parse_qs(_form_or_query(self.body, self.query), keep_blank_values=True)


@cache
def service_model(service_name: str) -> ServiceModel:
    return botocore.session.get_session().get_service_model(service_name)


@dataclass(frozen=True)
class _Route:
    method: str
    pattern: re.Pattern[str]
    operation: str


@cache
def _rest_routes(service_name: str) -> tuple[_Route, ...]:
    """Regexes for every REST operation of a service, built from botocore's ``requestUri`` templates."""
    model = service_model(service_name)
    routes = []
    for name in model.operation_names:
        http = model.operation_model(name).http
        template = http["requestUri"].split("?", 1)[0]
        regex = ""
        for literal, label in re.findall(r"([^{]*)(?:\{([^}]+)\})?", template):
            regex += re.escape(literal)
            if label:
                greedy = label.endswith("+")
                regex += f"(?P<{label.rstrip('+')}>{'.+' if greedy else '[^/]+'})"
        routes.append(_Route(http["method"], re.compile(f"^{regex}/?$"), name))
    return tuple(routes)


def identify(environ: dict[str, Any], body: bytes) -> AwsCall:
    """Work out service, region and operation of a WSGI request the way AWS front ends do."""
    method = environ["REQUEST_METHOD"]
    raw_uri = environ.get("RAW_URI") or quote(environ.get("PATH_INFO", "/"))
    split = urlsplit(raw_uri)
    path, query = split.path or "/", environ.get("QUERY_STRING", split.query)
    scope = _CREDENTIAL_SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    signing_name = scope["service"] if scope else ""
    region = scope["region"] if scope else "us-east-1"
    service_name = SIGNING_TO_SERVICE.get(signing_name)
    protocol = service_model(service_name).protocol if service_name else ""
    operation, path_params = "", {}

    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target:
        operation = target.rsplit(".", 1)[-1]
    elif protocol in ("query", "ec2") or (not protocol and "Action=" in _form_or_query(body, query)):
        action = parse_qs(_form_or_query(body, query)).get("Action", [""])
        operation = action[0]
    elif protocol == "rest-json" and service_name:
        for route in _rest_routes(service_name):
            match = route.pattern.match(path)
            if route.method == method and match:
                operation = route.operation
                path_params = {k: unquote(v) for k, v in match.groupdict().items()}
                break
    return AwsCall(signing_name, region, operation, protocol, method, path, query, body, path_params)


def _form_or_query(body: bytes, query: str) -> str:
    return body.decode("utf-8", "replace") if body else query


# --- replies -------------------------------------------------------------------------------------------------


def json_reply(payload: dict[str, Any], protocol: str, status: int = 200) -> Reply:
    content_type = "application/x-amz-json-1.1" if protocol == "json" else "application/json"
    return Reply(status, [("Content-Type", content_type), _request_id_header()], json.dumps(payload).encode())


def error_reply(call: AwsCall, status: int, code: str, message: str, **extra: str) -> Reply:
    """An error exactly as the service's protocol carries it, so botocore raises ``ClientError(code)``."""
    request_id = str(uuid.uuid4())
    if call.protocol == "rest-json":
        # rest-json: botocore reads the code from x-amzn-ErrorType, the message from the body.
        body = json.dumps({"message": message, **extra}).encode()
        headers = [("Content-Type", "application/json"), ("x-amzn-ErrorType", f"{code}:")]
    elif call.protocol == "json":
        body = json.dumps({"__type": code, "message": message, **extra}).encode()
        headers = [("Content-Type", "application/x-amz-json-1.1")]
    elif call.protocol == "ec2":
        body = (
            f"<Response><Errors><Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
            f"</Error></Errors><RequestID>{request_id}</RequestID></Response>"
        ).encode()
        headers = [("Content-Type", "text/xml")]
    else:  # query protocol (autoscaling, sts, iam)
        fault = "Receiver" if status >= 500 else "Sender"
        body = (
            f"<ErrorResponse><Error><Type>{fault}</Type><Code>{escape(code)}</Code>"
            f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>"
        ).encode()
        headers = [("Content-Type", "text/xml")]
    return Reply(status, [*headers, ("x-amzn-RequestId", request_id)], body)


def _request_id_header() -> tuple[str, str]:
    return ("x-amzn-RequestId", str(uuid.uuid4()))


# --- injected faults -----------------------------------------------------------------------------------------

#: How each injected fault kind looks, per service: (HTTP status, error code, message). Codes are the ones the
#: real service sends (and, where the botocore model declares one, the modelled error shape).
FAULTS: dict[str, dict[FaultKind, tuple[int, str, str]]] = {
    "eks": {
        "throttle": (400, "ThrottlingException", "Rate exceeded"),
        "server_error": (500, "ServerException", "Internal service error"),
        "busy": (409, "ResourceInUseException", "Nodegroup cannot be updated as it is currently not in Active State"),
        "conflict": (409, "ResourceInUseException", "An update is already in progress for this resource"),
    },
    "autoscaling": {
        "throttle": (400, "Throttling", "Rate exceeded"),
        "server_error": (500, "InternalFailure", "An internal error occurred"),
        "busy": (400, "ScalingActivityInProgress", "Scaling activity is in progress and blocks this action"),
        "conflict": (500, "ResourceContention", "You already have a pending update to an Auto Scaling resource"),
    },
    "ec2": {
        "throttle": (503, "RequestLimitExceeded", "Request limit exceeded."),
        "server_error": (500, "InternalError", "An internal error has occurred"),
        "busy": (400, "IncorrectInstanceState", "The instance is not in a state from which it can be modified"),
        "conflict": (400, "IncorrectInstanceState", "The instance is not in a state from which it can be modified"),
    },
    "servicequotas": {
        "throttle": (400, "TooManyRequestsException", "Rate exceeded"),
        "server_error": (500, "ServiceException", "Something went wrong."),
        "busy": (
            400,
            "ResourceAlreadyExistsException",
            "Only one open service quota increase request is allowed per quota.",
        ),
        "conflict": (
            400,
            "ResourceAlreadyExistsException",
            "Only one open service quota increase request is allowed per quota.",
        ),
    },
}
_GENERIC_FAULTS: dict[FaultKind, tuple[int, str, str]] = {
    "throttle": (400, "Throttling", "Rate exceeded"),
    "server_error": (500, "InternalFailure", "An internal error occurred"),
    "busy": (409, "ConflictException", "The resource is busy"),
    "conflict": (409, "ConflictException", "The resource is busy"),
}


def fault_reply(call: AwsCall, kind: FaultKind) -> Reply:
    if kind == "timeout":
        # An AWS front end that gave up on its backend answers 504 with no AWS error body, so botocore reports
        # error code "504" (and retries it, unless the client was told not to).
        return Reply(504, [("Content-Type", "text/plain"), _request_id_header()], b"")
    status, code, message = FAULTS.get(call.service, _GENERIC_FAULTS)[kind]
    return error_reply(call, status, code, message)
