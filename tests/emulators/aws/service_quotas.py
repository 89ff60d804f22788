"""A Service Quotas fake for EC2's GPU quotas (moto only knows a few VPC defaults).

Shapes follow botocore's ``service-quotas`` model (``ServiceQuota``, ``RequestedServiceQuotaChange``) and the
errors are the modelled ones: unknown service/quota -> ``NoSuchResourceException``; a desired value not above
the current one -> ``IllegalArgumentException``; a second request while one is open (``PENDING`` or
``CASE_OPENED``) -> ``ResourceAlreadyExistsException``. Quotas and requests are per region, values in vCPUs.
Requests stay ``PENDING`` until the test hook :meth:`ServiceQuotasFake.resolve` moves them; ``APPROVED`` raises
the quota to the desired value.
"""

from __future__ import annotations

import base64
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tests.emulators.aws.moto_state import ACCOUNT_ID
from tests.emulators.aws.wire import AwsCall, Reply, error_reply, json_reply

Passthrough = Callable[[], Reply]
Handler = Callable[[AwsCall, Passthrough], Reply]

SERVICE_CODE = "ec2"
SERVICE_NAME = "Amazon Elastic Compute Cloud (Amazon EC2)"
STATUSES = frozenset({"PENDING", "CASE_OPENED", "APPROVED", "DENIED", "CASE_CLOSED", "NOT_APPROVED", "INVALID_REQUEST"})
OPEN_STATUSES = frozenset({"PENDING", "CASE_OPENED"})


@dataclass(frozen=True)
class QuotaSpec:
    code: str
    name: str
    usage_class: str  # the AWS/Usage "Class" dimension
    default: float


#: The EC2 vCPU quotas per instance family group; AWS defaults of a fresh account.
EC2_QUOTAS: dict[str, QuotaSpec] = {
    spec.code: spec
    for spec in (
        QuotaSpec("L-DB2E81BA", "Running On-Demand G and VT instances", "G/OnDemand", 0.0),
        QuotaSpec("L-417A185B", "Running On-Demand P instances", "P/OnDemand", 0.0),
        QuotaSpec("L-3819A6DF", "All G and VT Spot Instance Requests", "G/Spot", 0.0),
        QuotaSpec("L-7212CCBC", "All P Spot Instance Requests", "P/Spot", 0.0),
        QuotaSpec(
            "L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "Standard/OnDemand", 5.0
        ),
    )
}


@dataclass
class QuotaRequest:
    id: str
    region: str
    code: str
    desired: float
    status: str = "PENDING"
    case_id: str | None = None
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        spec = EC2_QUOTAS[self.code]
        body: dict[str, Any] = {
            "Id": self.id,
            "ServiceCode": SERVICE_CODE,
            "ServiceName": SERVICE_NAME,
            "QuotaCode": self.code,
            "QuotaName": spec.name,
            "DesiredValue": self.desired,
            "Status": self.status,
            "Created": self.created,
            "LastUpdated": self.updated,
            "Requester": f'{{"accountId":"{ACCOUNT_ID}","callerArn":"arn:aws:iam::{ACCOUNT_ID}:user/testing"}}',
            "QuotaArn": _quota_arn(self.region, self.code),
            "GlobalQuota": False,
            "Unit": "None",
            "QuotaRequestedAtLevel": "ACCOUNT",
        }
        if self.case_id:
            body["CaseId"] = self.case_id
        return body


def _quota_arn(region: str, code: str) -> str:
    return f"arn:aws:servicequotas:{region}:{ACCOUNT_ID}:{SERVICE_CODE}/{code}"


def _quota_json(region: str, spec: QuotaSpec, value: float) -> dict[str, Any]:
    return {
        "ServiceCode": SERVICE_CODE,
        "ServiceName": SERVICE_NAME,
        "QuotaArn": _quota_arn(region, spec.code),
        "QuotaCode": spec.code,
        "QuotaName": spec.name,
        "Value": value,
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
        "UsageMetric": {
            "MetricNamespace": "AWS/Usage",
            "MetricName": "ResourceCount",
            "MetricDimensions": {"Class": spec.usage_class, "Resource": "vCPU", "Service": "EC2", "Type": "Resource"},
            "MetricStatisticRecommendation": "Maximum",
        },
        "QuotaAppliedAtLevel": "ACCOUNT",
        "Description": f"Maximum number of vCPUs assigned to the {spec.name}",
    }


class _Refusal(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class ServiceQuotasFake:
    """Thread-safe in-memory Service Quotas for ``ec2``; seed with :meth:`set_quota`, resolve with :meth:`resolve`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, str], float] = {}  # (region, code) -> applied value, when not the default
        self._requests: dict[str, QuotaRequest] = {}

    def reset(self) -> None:
        with self._lock:
            self._values.clear()
            self._requests.clear()

    # --- test hooks ------------------------------------------------------------------------------------------

    def set_quota(self, region: str, code: str, value: float) -> None:
        if code not in EC2_QUOTAS:
            raise KeyError(f"unknown EC2 quota code {code!r}; known: {sorted(EC2_QUOTAS)}")
        with self._lock:
            self._values[(region, code)] = float(value)

    def value(self, region: str, code: str) -> float:
        with self._lock:
            return self._value(region, code)

    def explicit_value(self, region: str, code: str) -> float | None:
        """The value a test set (or an approved request applied); None while it is the account default."""
        with self._lock:
            return self._values.get((region, code))

    def resolve(self, request_id: str, status: str) -> QuotaRequest:
        """Move a request to ``status`` as AWS support would; ``APPROVED`` applies the desired value."""
        if status not in STATUSES:
            raise ValueError(f"unknown request status {status!r}; known: {sorted(STATUSES)}")
        with self._lock:
            request = self._requests[request_id]
            request.status = status
            request.updated = time.time()
            if status == "CASE_OPENED" and request.case_id is None:
                request.case_id = (
                    f"case-{ACCOUNT_ID}-{secrets.token_hex(2)}-{time.gmtime().tm_year}-{secrets.token_hex(8)}"
                )
            if status == "APPROVED":
                self._values[(request.region, request.code)] = request.desired
            return replace(request)

    def requests(self) -> list[QuotaRequest]:
        with self._lock:
            return [replace(r) for r in self._requests.values()]

    # --- API -------------------------------------------------------------------------------------------------

    def handlers(self) -> dict[str, Handler]:
        operations: dict[str, Callable[[AwsCall, dict[str, Any]], dict[str, Any]]] = {
            "GetServiceQuota": self._get_service_quota,
            "GetAWSDefaultServiceQuota": self._get_default_quota,
            "ListServiceQuotas": self._list_service_quotas,
            "RequestServiceQuotaIncrease": self._request_increase,
            "GetRequestedServiceQuotaChange": self._get_request,
            "ListRequestedServiceQuotaChangeHistory": self._history,
            "ListRequestedServiceQuotaChangeHistoryByQuota": self._history_by_quota,
        }
        return {name: self._wrap(operation) for name, operation in operations.items()}

    def _wrap(self, operation: Callable[[AwsCall, dict[str, Any]], dict[str, Any]]) -> Handler:
        def handler(call: AwsCall, passthrough: Passthrough) -> Reply:
            try:
                with self._lock:
                    return json_reply(operation(call, call.json_body()), call.protocol)
            except _Refusal as refusal:
                return error_reply(call, 400, refusal.code, refusal.message)

        return handler

    def _value(self, region: str, code: str) -> float:
        return self._values.get((region, code), EC2_QUOTAS[code].default)

    @staticmethod
    def _spec(body: dict[str, Any]) -> QuotaSpec:
        if body.get("ServiceCode") != SERVICE_CODE:
            raise _Refusal(
                "NoSuchResourceException", "The request failed because the specified service does not exist."
            )
        spec = EC2_QUOTAS.get(str(body.get("QuotaCode")))
        if spec is None:
            raise _Refusal("NoSuchResourceException", "The request failed because the specified quota does not exist.")
        return spec

    def _get_service_quota(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        spec = self._spec(body)
        return {"Quota": _quota_json(call.region, spec, self._value(call.region, spec.code))}

    def _get_default_quota(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        spec = self._spec(body)
        return {"Quota": _quota_json(call.region, spec, spec.default)}

    def _list_service_quotas(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("ServiceCode") != SERVICE_CODE:
            raise _Refusal(
                "NoSuchResourceException", "The request failed because the specified service does not exist."
            )
        wanted = body.get("QuotaCode")
        quotas = [
            _quota_json(call.region, spec, self._value(call.region, spec.code))
            for spec in EC2_QUOTAS.values()
            if wanted in (None, spec.code)
        ]
        page, token = _page(quotas, body)
        return {"Quotas": page, **token}

    def _request_increase(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        spec = self._spec(body)
        desired = float(body.get("DesiredValue", 0))
        if desired <= self._value(call.region, spec.code):
            raise _Refusal(
                "IllegalArgumentException", "You must provide a quota value greater than the current quota value"
            )
        if any(
            r.region == call.region and r.code == spec.code and r.status in OPEN_STATUSES
            for r in self._requests.values()
        ):
            raise _Refusal(
                "ResourceAlreadyExistsException", "Only one open service quota increase request is allowed per quota."
            )
        request = QuotaRequest(secrets.token_hex(16) + secrets.token_urlsafe(8)[:10], call.region, spec.code, desired)
        self._requests[request.id] = request
        return {"RequestedQuota": request.to_json()}

    def _get_request(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        request = self._requests.get(str(body.get("RequestId")))
        if request is None or request.region != call.region:
            raise _Refusal(
                "NoSuchResourceException", "The request failed because the specified request does not exist."
            )
        return {"RequestedQuota": request.to_json()}

    def _history(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        service = body.get("ServiceCode")
        if service not in (None, SERVICE_CODE):
            raise _Refusal(
                "NoSuchResourceException", "The request failed because the specified service does not exist."
            )
        return self._history_page(call, body, code=None)

    def _history_by_quota(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        return self._history_page(call, body, code=self._spec(body).code)

    def _history_page(self, call: AwsCall, body: dict[str, Any], code: str | None) -> dict[str, Any]:
        status = body.get("Status")
        matching = [
            r.to_json()
            for r in reversed(self._requests.values())  # newest first
            if r.region == call.region and code in (None, r.code) and status in (None, r.status)
        ]
        page, token = _page(matching, body)
        return {"RequestedQuotas": page, **token}


def _page(items: list[dict[str, Any]], body: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Offset paging behind an opaque base64 NextToken, as the API's token pattern allows."""
    size = int(body.get("MaxResults") or 100)
    token = body.get("NextToken")
    try:
        start = int(base64.b64decode(token).decode()) if token else 0
    except ValueError as bad:
        raise _Refusal("InvalidPaginationTokenException", "Invalid pagination token.") from bad
    end = start + size
    more = {"NextToken": base64.b64encode(str(end).encode()).decode()} if end < len(items) else {}
    return items[start:end], more
