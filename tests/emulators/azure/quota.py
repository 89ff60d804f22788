"""Microsoft.Quota for compute VM families: quotas, usages, quota requests (azure-mgmt-quota 3.x ``QuotaMgmtClient``).

Scope: ``subscriptions/{sub}/providers/Microsoft.Compute/locations/{loc}``; resource = VM family (e.g.
``standardNCADSA100v4Family``) or ``lowPriorityCores`` (spot), counted in vCPUs.

A PUT/PATCH of ``quotas/{family}`` opens a quota request and answers 202 with ``Location`` pointing at
``operationsStatus/{requestId}`` (the shape of the service's own examples): that monitor answers 202 while the
request is open, then 200 with the quota (new limit) on Succeeded, or 400 with the request's error on
Failed, which azure-core's LRO poller raises as ``HttpResponseError``. The request is also readable through
``quotaRequests/{id}``. The limit changes only when the request succeeds.

Nobody's polls decide a request. The test or the sandbox does (:meth:`QuotaService.decide`, now or ``after_s``
later on the emulator's clock; :meth:`QuotaService.decide_next` for requests not filed yet): ``Succeeded``,
``Failed`` (error ``ContactSupport``, the service's own example), ``Invalid``, or ``Escalated`` (still open: the
monitor keeps answering 202 until support decides). A request nobody decides is approved ``request_seconds``
after it was filed, looked at or not (``None``: it waits for a decision). While a request for a family is open
(Accepted, InProgress, Escalated) a second one for it is refused: 409 ``Conflict`` (the code is the emulator's
choice; the service's own wording is not documented).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from werkzeug.wrappers import Response

from tests.emulators.azure.arm import (
    ArmError,
    AsyncOperation,
    Host,
    RequestContext,
    Route,
    empty_response,
    json_response,
    now_iso,
    paged,
    retry_after_headers,
)

_SCOPE = r"/subscriptions/(?P<sub>[^/]+)/providers/(?P<provider>[^/]+)/locations/(?P<loc>[^/]+)"
_QUOTA = _SCOPE + r"/providers/Microsoft\.Quota"

QuotaRequestState = Literal["Accepted", "InProgress", "Escalated", "Succeeded", "Failed", "Invalid"]
#: What support can decide about a request.
QuotaOutcome = Literal["Succeeded", "Failed", "Invalid", "Escalated"]
OPEN_STATES: frozenset[str] = frozenset({"Accepted", "InProgress", "Escalated"})
_OUTCOMES: frozenset[str] = frozenset({"Succeeded", "Failed", "Invalid", "Escalated"})

#: Display names the service returns for the GPU families the product cares about.
_LOCALIZED: dict[str, str] = {
    "standardncadsa100v4family": "Standard NCADS_A100_v4 Family vCPUs",
    "standardncasv3_t4family": "Standard NCASv3_T4 Family vCPUs",
    "standardndsv2family": "Standard NDSv2 Family vCPUs",
    "standardndamsv4_a100family": "Standard NDAMSv4_A100 Family vCPUs",
    "standardnvadsa10v5family": "Standard NVADSA10v5 Family vCPUs",
    "lowprioritycores": "Total Regional Low-priority vCPUs",
}


@dataclass
class QuotaEntry:
    subscription: str
    provider: str
    location: str
    family: str
    limit: int
    usage: int = 0

    @property
    def scope(self) -> str:
        return f"/subscriptions/{self.subscription}/providers/{self.provider}/locations/{self.location}"

    def name_body(self) -> dict[str, str]:
        return {"value": self.family, "localizedValue": _LOCALIZED.get(self.family.lower(), f"{self.family} vCPUs")}

    @property
    def resource_type(self) -> str:
        return "lowPriority" if self.family.lower() == "lowprioritycores" else "dedicated"


@dataclass
class QuotaRequest:
    id: str
    entry: QuotaEntry
    requested_limit: int
    state: QuotaRequestState = "InProgress"
    message: str = "Request processing"
    submit_time: str = field(default_factory=now_iso)
    error: ArmError | None = None


def quota_body(entry: QuotaEntry) -> dict[str, Any]:
    return {
        "id": f"{entry.scope}/providers/Microsoft.Quota/quotas/{entry.family}",
        "name": entry.family,
        "type": "Microsoft.Quota/Quotas",
        "properties": {
            "limit": {"limitObjectType": "LimitValue", "value": entry.limit},
            "unit": "Count",
            "name": entry.name_body(),
            "resourceType": entry.resource_type,
            "isQuotaApplicable": True,
        },
    }


def usage_body(entry: QuotaEntry) -> dict[str, Any]:
    return {
        "id": f"{entry.scope}/providers/Microsoft.Quota/usages/{entry.family}",
        "name": entry.family,
        "type": "Microsoft.Quota/Usages",
        "properties": {
            "usages": {"value": entry.usage, "usagesType": "Individual"},
            "unit": "Count",
            "name": entry.name_body(),
            "resourceType": entry.resource_type,
            "isQuotaApplicable": True,
        },
    }


def request_body(request: QuotaRequest) -> dict[str, Any]:
    entry = request.entry
    sub_request: dict[str, Any] = {
        "name": entry.name_body(),
        "resourceType": entry.resource_type,
        "limit": {"limitObjectType": "LimitValue", "value": request.requested_limit},
        "provisioningState": request.state,
        "message": request.message,
        "subRequestId": request.id,
    }
    props: dict[str, Any] = {
        "provisioningState": request.state,
        "message": request.message,
        "requestSubmitTime": request.submit_time,
        "value": [sub_request],
    }
    if request.error is not None:
        props["error"] = request.error.body()["error"]
    return {
        "id": f"{entry.scope}/providers/Microsoft.Quota/quotaRequests/{request.id}",
        "name": request.id,
        "type": "Microsoft.Quota/quotaRequests",
        "properties": props,
    }


def _denied() -> ArmError:
    # The error the service's own "QuotaRequestFailed" example carries.
    return ArmError(400, "ContactSupport", "Request failed, please contact support.")


class QuotaService:
    """Quota state and routes. Every method runs under the emulator's lock."""

    def __init__(self, host: Host, lock: threading.RLock) -> None:
        self._host = host
        self._lock = lock
        self.entries: dict[tuple[str, str, str, str], QuotaEntry] = {}
        self.requests: dict[str, QuotaRequest] = {}
        self._operations: dict[str, AsyncOperation] = {}
        #: How long an undecided request runs before it is approved on its own; ``None``: until decided.
        self.request_seconds: float | None = 0.1
        self._scheduled: list[tuple[float, str, QuotaOutcome]] = []  # (due on the clock, request id, outcome)
        self._next: list[tuple[str | None, float, QuotaOutcome]] = []  # (family or any, after_s, outcome)

    # -- seeding and inspection ---------------------------------------------------------------------------------

    def set_quota(
        self,
        subscription: str,
        location: str,
        family: str,
        limit: int,
        usage: int = 0,
        provider: str = "Microsoft.Compute",
    ) -> QuotaEntry:
        with self._lock:
            key = (subscription.lower(), provider.lower(), location.lower(), family.lower())
            entry = self.entries.get(key)
            if entry is None:
                entry = self.entries[key] = QuotaEntry(subscription, provider, location, family, limit, usage)
            entry.limit, entry.usage = limit, usage
            return entry

    def quota(self, subscription: str, location: str, family: str, provider: str = "Microsoft.Compute") -> QuotaEntry:
        with self._lock:
            return self._entry(subscription, provider, location, family)

    def decide(self, request_id: str, outcome: QuotaOutcome, after_s: float = 0.0) -> None:
        """Support's decision on a request, now or ``after_s`` seconds from now (on the emulator's clock)."""
        _check_outcome(outcome)
        with self._lock:
            operation = self._operations.get(request_id.lower())
            if operation is None:
                raise KeyError(f"no quota request {request_id!r}")
            operation.finish_at = None  # a decision replaces the approval that would come with time
            if after_s <= 0:
                self._apply(request_id, outcome)
                return
            due = self._host.operations.now() + after_s
            self._scheduled.append((due, request_id, outcome))
        self._host.operations.wake_at(due)

    def decide_next(self, outcome: QuotaOutcome, after_s: float = 0.0, family: str | None = None) -> None:
        """The next request filed (for ``family``, or any) is decided ``after_s`` seconds after it was filed."""
        _check_outcome(outcome)
        with self._lock:
            self._next.append((family.lower() if family else None, after_s, outcome))

    def tick(self) -> None:
        """Apply the decisions whose time has come (callers hold the emulator's lock)."""
        now = self._host.operations.now()
        due = sorted((entry for entry in self._scheduled if entry[0] <= now), key=lambda entry: entry[0])
        self._scheduled = [entry for entry in self._scheduled if entry[0] > now]
        for _, request_id, outcome in due:
            self._apply(request_id, outcome)

    def _apply(self, request_id: str, outcome: QuotaOutcome) -> None:
        request = self.requests[request_id.lower()]
        operation = self._operations[request_id.lower()]
        if not operation.running:
            return
        if outcome == "Succeeded":
            operation.finish("Succeeded")
        elif outcome == "Escalated":
            request.state = "Escalated"
            request.message = "The request has been escalated to support for review."
        else:
            request.state = outcome
            operation.finish("Failed", _denied())

    # -- internals ----------------------------------------------------------------------------------------------

    def _entry(self, subscription: str, provider: str, location: str, family: str) -> QuotaEntry:
        entry = self.entries.get((subscription.lower(), provider.lower(), location.lower(), family.lower()))
        if entry is None:
            raise ArmError(
                404,
                "ResourceNotFound",
                f"Quota resource '{family}' was not found at scope "
                f"'subscriptions/{subscription}/providers/{provider}/locations/{location}'.",
            )
        return entry

    def _in_scope(self, m: dict[str, str]) -> list[QuotaEntry]:
        scope = (m["sub"].lower(), m["provider"].lower(), m["loc"].lower())
        return [e for k, e in self.entries.items() if k[:3] == scope]

    def _request(self, m: dict[str, str]) -> tuple[QuotaRequest, AsyncOperation]:
        request = self.requests.get(m["id"].lower())
        if request is None or request.entry.scope.lower() != (
            f"/subscriptions/{m['sub']}/providers/{m['provider']}/locations/{m['loc']}".lower()
        ):
            raise ArmError(404, "ResourceNotFound", f"Quota request '{m['id']}' was not found.")
        return request, self._operations[request.id.lower()]

    def routes(self) -> list[Route]:
        return [
            Route("GET", _QUOTA + "/quotas", "quota.list", self._list_quotas),
            Route("GET", _QUOTA + "/quotas/(?P<name>[^/]+)", "quota.get", self._get_quota),
            Route("PUT", _QUOTA + "/quotas/(?P<name>[^/]+)", "quota.createOrUpdate", self._put_quota),
            Route("PATCH", _QUOTA + "/quotas/(?P<name>[^/]+)", "quota.update", self._put_quota),
            Route("GET", _QUOTA + "/usages", "usages.list", self._list_usages),
            Route("GET", _QUOTA + "/usages/(?P<name>[^/]+)", "usages.get", self._get_usage),
            Route("GET", _QUOTA + "/quotaRequests", "quotaRequestStatus.list", self._list_requests),
            Route("GET", _QUOTA + "/quotaRequests/(?P<id>[^/]+)", "quotaRequestStatus.get", self._get_request),
            Route("GET", _QUOTA + "/operationsStatus/(?P<id>[^/]+)", "quota.operationStatus", self._operation_status),
        ]

    def _list_quotas(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            items = [quota_body(e) for e in self._in_scope(m)]
        return json_response(paged(ctx, items, self._host.page_size))

    def _get_quota(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            return json_response(quota_body(self._entry(m["sub"], m["provider"], m["loc"], m["name"])))

    def _list_usages(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            items = [usage_body(e) for e in self._in_scope(m)]
        return json_response(paged(ctx, items, self._host.page_size))

    def _get_usage(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            return json_response(usage_body(self._entry(m["sub"], m["provider"], m["loc"], m["name"])))

    def _list_requests(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            scope = f"/subscriptions/{m['sub']}/providers/{m['provider']}/locations/{m['loc']}".lower()
            items = [request_body(r) for r in self.requests.values() if r.entry.scope.lower() == scope]
        top = ctx.request.args.get("$top")
        if top and top.isdigit():
            items = items[: int(top)]
        return json_response(paged(ctx, items, self._host.page_size))

    def _get_request(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            request, _ = self._request(m)
            return json_response(request_body(request))

    def _put_quota(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        body = ctx.json()
        with self._lock:
            entry = self._entry(m["sub"], m["provider"], m["loc"], m["name"])
            requested = _requested_limit(body, entry.family)
            open_request = next(
                (r for r in self.requests.values() if r.entry is entry and r.state in OPEN_STATES), None
            )
            if open_request is not None:
                raise ArmError(
                    409,
                    "Conflict",
                    f"A quota request for '{entry.family}' is already in progress (request {open_request.id}):"
                    " wait for it to complete before submitting another.",
                )
            scripted = next((i for i, n in enumerate(self._next) if n[0] in (None, entry.family.lower())), None)
            operation = self._host.operations.start(
                "quota.createOrUpdate",
                f"{entry.scope}/providers/Microsoft.Quota/quotas/{entry.family}",
                None,  # polls never decide a quota request
                lambda: None,
                lambda: None,
                self.request_seconds if scripted is None else None,
            )
            request = QuotaRequest(operation.id, entry, requested)
            operation.on_succeeded = lambda: _approve(request)
            operation.on_failed = lambda: _deny(request, operation.error)
            self.requests[request.id.lower()] = request
            self._operations[request.id.lower()] = operation
            if scripted is not None:
                _, after_s, outcome = self._next.pop(scripted)
                if after_s <= 0:
                    self._apply(request.id, outcome)
                else:
                    due = self._host.operations.now() + after_s
                    self._scheduled.append((due, request.id, outcome))
                    self._host.operations.wake_at(due)
        monitor = ctx.absolute(f"{entry.scope}/providers/Microsoft.Quota/operationsStatus/{request.id}")
        return empty_response(202, {"Location": monitor, **retry_after_headers(self._host.retry_after_s)})

    def _operation_status(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            request, operation = self._request(m)
            if operation.running:
                headers = {"Location": ctx.absolute(ctx.request.path), **retry_after_headers(self._host.retry_after_s)}
                return json_response(request_body(request), 202, headers)
            if operation.status == "Succeeded":
                location = ctx.absolute(f"{request.entry.scope}/providers/Microsoft.Quota/quotaRequests/{request.id}")
                return json_response(quota_body(request.entry), 200, {"Location": location})
            error = request.error or _denied()
        return json_response(error.body(), error.status)


def _requested_limit(body: dict[str, Any], family: str) -> int:
    props = body.get("properties")
    limit = props.get("limit") if isinstance(props, dict) else None
    value = limit.get("value") if isinstance(limit, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ArmError(400, "BadRequest", "properties.limit.value must be a non-negative integer.", target="limit")
    kind = limit.get("limitObjectType", "LimitValue") if isinstance(limit, dict) else "LimitValue"
    if kind != "LimitValue":
        raise ArmError(400, "BadRequest", f"Unsupported limitObjectType '{kind}'.", target="limitObjectType")
    name = props.get("name") if isinstance(props, dict) else None
    named = name.get("value") if isinstance(name, dict) else None
    if named is not None and str(named).lower() != family.lower():
        raise ArmError(
            400,
            "BadRequest",
            f"Resource name '{named}' in the body does not match '{family}' in the URL.",
            target="name",
        )
    return value


def _check_outcome(outcome: str) -> None:
    if outcome not in _OUTCOMES:
        raise ValueError(f"unknown quota request outcome {outcome!r}; known: {sorted(_OUTCOMES)}")


def _approve(request: QuotaRequest) -> None:
    request.state = "Succeeded"
    request.message = "Request completed"
    request.entry.limit = request.requested_limit


def _deny(request: QuotaRequest, error: ArmError | None) -> None:
    if request.state not in ("Failed", "Invalid"):
        request.state = "Failed"
    request.error = error or _denied()
    request.message = request.error.message
