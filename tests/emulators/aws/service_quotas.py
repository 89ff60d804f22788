"""A Service Quotas fake for EC2's GPU quotas (moto only knows a few VPC defaults).

Shapes follow botocore's ``service-quotas`` model (``ServiceQuota``, ``RequestedServiceQuotaChange``) and the
errors are the modelled ones (plus AWS's generic input ``ValidationException``):

- unknown service/quota/request -> ``NoSuchResourceException``; so is ``GetServiceQuota`` of a quota with no
  *applied* value (a fresh account: only ``GetAWSDefaultServiceQuota`` answers, and ``ListServiceQuotas``
  leaves it out; "If the applied quota value is not available for a quota, the quota is not retrieved");
- a desired value not above the current one, or a quota that is not ``Adjustable`` ->
  ``IllegalArgumentException``;
- a second request while one is open (``PENDING`` or ``CASE_OPENED``) -> ``ResourceAlreadyExistsException``;
- a ``Status`` filter outside the model's enum on either history list -> ``ValidationException``.

Quotas and requests are per region, values in vCPUs. A request stays ``PENDING`` until the test or the sandbox
decides it (:meth:`ServiceQuotasFake.decide` now or ``after_s`` later on the emulator's clock, or
:meth:`ServiceQuotasFake.decide_next` for requests not filed yet), never because someone polled it. ``APPROVED``
applies the desired value, or a lower ``value`` (a partial approval: the request keeps its ``DesiredValue``);
``CASE_OPENED`` gives the request a support ``CaseId``.
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
#: botocore's ``RequestStatus`` enum, in the model's order.
_STATUS_ORDER = ("PENDING", "CASE_OPENED", "APPROVED", "DENIED", "CASE_CLOSED", "NOT_APPROVED", "INVALID_REQUEST")
STATUSES = frozenset(_STATUS_ORDER)
OPEN_STATUSES = frozenset({"PENDING", "CASE_OPENED"})
_NO_QUOTA = "The request failed because the specified quota does not exist."
_NO_SERVICE = "The request failed because the specified service does not exist."


@dataclass(frozen=True)
class QuotaSpec:
    code: str
    name: str
    usage_class: str  # the AWS/Usage "Class" dimension
    default: float
    adjustable: bool = True


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

    def to_json(self, spec: QuotaSpec) -> dict[str, Any]:
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
        "Adjustable": spec.adjustable,
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


@dataclass(frozen=True)
class Decision:
    """What support decides about a request: a status, and for ``APPROVED`` the value granted (None: as asked)."""

    status: str
    value: float | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown request status {self.status!r}; known: {sorted(STATUSES)}")
        if self.value is not None and self.status != "APPROVED":
            raise ValueError("only an APPROVED decision grants a value")


class ServiceQuotasFake:
    """Thread-safe in-memory Service Quotas for ``ec2``; seed with :meth:`set_quota`, decide with :meth:`decide`."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wake_at: Callable[[float], None] = lambda deadline: None,
    ) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._wake_at = wake_at
        self._specs: dict[str, QuotaSpec] = dict(EC2_QUOTAS)
        self._values: dict[tuple[str, str], float] = {}  # (region, code) -> applied value
        self._requests: dict[str, QuotaRequest] = {}
        self._scheduled: list[tuple[float, str, Decision]] = []  # (due on the clock, request id, decision)
        self._next: list[tuple[str | None, float, Decision]] = []  # (quota code or any, after_s, decision)

    def reset(self) -> None:
        with self._lock:
            self._specs = dict(EC2_QUOTAS)
            self._values.clear()
            self._requests.clear()
            self._scheduled.clear()
            self._next.clear()

    # --- test hooks ------------------------------------------------------------------------------------------

    def define_quota(self, spec: QuotaSpec) -> None:
        """Add (or redefine) a quota, e.g. one that is not ``Adjustable``."""
        with self._lock:
            self._specs[spec.code] = spec

    def set_quota(self, region: str, code: str, value: float) -> None:
        """Give the quota an applied value in ``region`` (what GetServiceQuota and ListServiceQuotas answer)."""
        if code not in self._specs:
            raise KeyError(f"unknown EC2 quota code {code!r}; known: {sorted(self._specs)}")
        with self._lock:
            self._values[(region, code)] = float(value)

    def value(self, region: str, code: str) -> float:
        """The value in force: the applied one, else the AWS default."""
        with self._lock:
            return self._value(region, code)

    def explicit_value(self, region: str, code: str) -> float | None:
        """The applied value (set by a test or by an approved request); None while there is none."""
        with self._lock:
            return self._values.get((region, code))

    def decide(self, request_id: str, status: str, value: float | None = None, after_s: float = 0.0) -> None:
        """Support moves a request to ``status`` now, or ``after_s`` seconds from now on the emulator's clock
        whether or not anyone looks. ``APPROVED`` applies ``value`` (default: the desired value; lower: a partial
        approval); ``CASE_OPENED`` opens a support case."""
        decision = Decision(status, value)
        with self._lock:
            if request_id not in self._requests:
                raise KeyError(f"no quota request {request_id!r}")
            if after_s <= 0:
                self._apply(self._requests[request_id], decision)
                return
            due = self._clock() + after_s
            self._scheduled.append((due, request_id, decision))
        self._wake_at(due)

    def decide_next(
        self, status: str, value: float | None = None, after_s: float = 0.0, code: str | None = None
    ) -> None:
        """The next request filed (for quota ``code``, or any) is decided ``after_s`` seconds after it was filed:
        how a sandbox scripts support before the job runs. Queued decisions are used in order."""
        decision = Decision(status, value)
        with self._lock:
            self._next.append((code, after_s, decision))

    def tick(self) -> None:
        """Apply the decisions whose time has come (the emulator runs this on every request and at each deadline)."""
        with self._lock:
            now = self._clock()
            due = [entry for entry in self._scheduled if entry[0] <= now]
            self._scheduled = [entry for entry in self._scheduled if entry[0] > now]
            for _, request_id, decision in sorted(due, key=lambda entry: entry[0]):
                request = self._requests.get(request_id)
                if request is not None:
                    self._apply(request, decision)

    def requests(self) -> list[QuotaRequest]:
        with self._lock:
            return [replace(r) for r in self._requests.values()]

    def _apply(self, request: QuotaRequest, decision: Decision) -> None:
        request.status = decision.status
        request.updated = time.time()
        if decision.status == "CASE_OPENED" and request.case_id is None:
            request.case_id = f"case-{ACCOUNT_ID}-{secrets.token_hex(2)}-{time.gmtime().tm_year}-{secrets.token_hex(8)}"
        if decision.status == "APPROVED":
            granted = request.desired if decision.value is None else decision.value
            self._values[(request.region, request.code)] = granted

    # --- API -------------------------------------------------------------------------------------------------

    def handlers(self) -> dict[str, Handler]:
        operations: dict[str, Callable[[AwsCall, dict[str, Any]], dict[str, Any]]] = {
            "GetServiceQuota": self._get_service_quota,
            "GetAWSDefaultServiceQuota": self._get_default_quota,
            "ListServiceQuotas": self._list_service_quotas,
            "ListAWSDefaultServiceQuotas": self._list_default_quotas,
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
        return self._values.get((region, code), self._specs[code].default)

    def _spec(self, body: dict[str, Any]) -> QuotaSpec:
        if body.get("ServiceCode") != SERVICE_CODE:
            raise _Refusal("NoSuchResourceException", _NO_SERVICE)
        spec = self._specs.get(str(body.get("QuotaCode")))
        if spec is None:
            raise _Refusal("NoSuchResourceException", _NO_QUOTA)
        return spec

    def _get_service_quota(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        spec = self._spec(body)
        applied = self._values.get((call.region, spec.code))
        if applied is None:
            raise _Refusal("NoSuchResourceException", _NO_QUOTA)
        return {"Quota": _quota_json(call.region, spec, applied)}

    def _get_default_quota(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        spec = self._spec(body)
        return {"Quota": _quota_json(call.region, spec, spec.default)}

    def _check_service(self, body: dict[str, Any]) -> None:
        if body.get("ServiceCode") != SERVICE_CODE:
            raise _Refusal("NoSuchResourceException", _NO_SERVICE)

    def _list_service_quotas(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        self._check_service(body)
        wanted = body.get("QuotaCode")
        quotas = [
            _quota_json(call.region, spec, self._values[(call.region, spec.code)])
            for spec in self._specs.values()
            if wanted in (None, spec.code) and (call.region, spec.code) in self._values
        ]
        page, token = _page(quotas, body)
        return {"Quotas": page, **token}

    def _list_default_quotas(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        self._check_service(body)
        page, token = _page([_quota_json(call.region, s, s.default) for s in self._specs.values()], body)
        return {"Quotas": page, **token}

    def _request_increase(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        spec = self._spec(body)
        if not spec.adjustable:
            raise _Refusal("IllegalArgumentException", f"The quota {spec.code} is not adjustable.")
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
        for index, (code, after_s, decision) in enumerate(self._next):
            if code in (None, spec.code):
                del self._next[index]
                if after_s <= 0:
                    self._apply(request, decision)
                else:
                    due = self._clock() + after_s
                    self._scheduled.append((due, request.id, decision))
                    self._wake_at(due)
                break
        return {"RequestedQuota": request.to_json(spec)}

    def _get_request(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        request = self._requests.get(str(body.get("RequestId")))
        if request is None or request.region != call.region:
            raise _Refusal(
                "NoSuchResourceException", "The request failed because the specified request does not exist."
            )
        return {"RequestedQuota": request.to_json(self._specs[request.code])}

    def _history(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        service = body.get("ServiceCode")
        if service not in (None, SERVICE_CODE):
            raise _Refusal("NoSuchResourceException", _NO_SERVICE)
        return self._history_page(call, body, code=None)

    def _history_by_quota(self, call: AwsCall, body: dict[str, Any]) -> dict[str, Any]:
        return self._history_page(call, body, code=self._spec(body).code)

    def _history_page(self, call: AwsCall, body: dict[str, Any], code: str | None) -> dict[str, Any]:
        status = body.get("Status")
        if status is not None and status not in STATUSES:
            # AWS's JSON front end checks enums before the service sees the request (botocore does not).
            raise _Refusal(
                "ValidationException",
                f"1 validation error detected: Value '{status}' at 'status' failed to satisfy constraint: Member must"
                f" satisfy enum value set: [{', '.join(_STATUS_ORDER)}]",
            )
        matching = [
            r.to_json(self._specs[r.code])
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
