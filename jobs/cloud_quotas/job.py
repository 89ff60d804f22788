"""The cloud-quotas job on one account scope (an AWS region, a GCP project, an Azure subscription): observe each
quota of the scope (limit, requests, conversion data) and the records of what was asked, plan (pure), then under
the scope's Lease file the requests and remember the outcomes, each entry on its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from jobs.cloud_quotas.ports import QuotaCloud, RequestStore
from jobs.core.cloud_quotas import (
    Asked,
    CloudRequest,
    Demand,
    GroupSize,
    QuotaFacts,
    QuotaPlan,
    Shape,
    Unreadable,
    asked,
    demand_of,
    plan_quota,
)
from jobs.core.policy import Policy
from jobs.core.policy_cloud_quotas import CloudQuota, NodeGroupsTarget
from jobs.envelope import PlanRow, ScopeRows, plan_rows
from jobs.errors import Busy, CloudError, Conflict, OutcomeUnknown, Throttled, Unavailable
from jobs.events import Events
from jobs.lease import RunLock
from jobs.retry import Backoff
from jobs.runner import ScopeReport, ScopeWork
from jobs.scopes import Scope

ItemStatus = Literal["requested", "recorded", "failed"]

#: Event reasons per outcome, so ``kubectl describe configmap`` reads like the cloud's console.
REASONS = {
    "open": "QuotaRequestOpen",
    "approved": "QuotaRequestApproved",
    "partial": "QuotaRequestPartiallyGranted",
    "denied": "QuotaRequestDenied",
}


@dataclass(frozen=True)
class Ports:
    cloud: QuotaCloud
    store: RequestStore
    lock: RunLock
    events: Events
    witness: None = None  # an account scope: no cluster to prove (jobs.runner)


@dataclass(frozen=True)
class ObservedQuota:
    """One entry as observed: the quota, its demand in the quota's unit, and what was asked before."""

    entry: CloudQuota
    facts: QuotaFacts
    demand: Demand
    remembered: Asked | Unreadable | None


@dataclass(frozen=True)
class Observation:
    seen: tuple[ObservedQuota, ...]


@dataclass(frozen=True)
class CloudQuotasPlan:
    plans: tuple[QuotaPlan, ...]

    @property
    def items(self) -> tuple[QuotaPlan, ...]:
        return tuple(p for p in self.plans if p.writes)

    @property
    def changes(self) -> int:
        """Requests count against the limit; remembering an outcome is bookkeeping."""
        return sum(p.action == "request" for p in self.plans)

    @property
    def considered(self) -> int:
        return len(self.plans)


@dataclass(frozen=True)
class RequestResult:
    plan: QuotaPlan
    status: ItemStatus
    message: str = ""
    request: CloudRequest | None = None


@dataclass(frozen=True)
class CloudQuotasWork(ScopeWork[Observation, CloudQuotasPlan, QuotaPlan, RequestResult]):
    """The cloud-quotas job on one account scope, as the runner drives it."""

    scope: Scope
    policy: Policy
    entries: tuple[CloudQuota, ...]
    now: datetime
    backoff: Backoff
    ports: Ports
    log: Any

    def observe(self, first: Observation | None) -> Observation:
        remembered = self.backoff.call(self.ports.store.load)
        earlier = {s.entry.name: s.demand for s in first.seen} if first is not None else {}
        seen = []
        for entry in self.entries:
            memory = remembered.get(entry.name)
            facts = self._facts(entry, memory if isinstance(memory, Asked) else None)
            # The conversion data (instance types, node groups) is read once per run, not again under the Lease.
            demand = earlier.get(entry.name) or self._demand(entry)
            seen.append(ObservedQuota(entry, facts, demand, memory))
        return Observation(tuple(seen))

    def plan(self, observed: Observation) -> CloudQuotasPlan:
        return CloudQuotasPlan(
            tuple(plan_quota(s.entry, s.facts, s.demand, s.remembered, self.now) for s in observed.seen)
        )

    def apply(self, item: QuotaPlan, fence: Callable[[str], None]) -> RequestResult:
        entry = item.entry
        if item.action != "request":
            assert item.remember is not None
            fence(f"record the outcome of {entry.name}")
            self.backoff.call(lambda: self.ports.store.save(entry.name, item.remember))  # type: ignore[arg-type]
            self._tell(item, item.remember, item.request)
            return RequestResult(item, "recorded", item.reason, item.request)
        assert item.file is not None
        value = item.file
        fence(f"request {value} {item.unit} for {entry.name}")
        try:
            # Throttled and busy mean the request was not taken: resent. A lost answer is looked for, never resent.
            request = self.backoff.call(
                lambda: self.ports.cloud.file(entry, value), retryable=lambda e: isinstance(e, Throttled | Busy)
            )
        except (Conflict, Unavailable, OutcomeUnknown) as exc:
            found = self._found_again(entry, exc)
            if found is None:
                self.backoff.call(lambda: self.ports.store.save(entry.name, asked(item, None, self.now)))
                message = f"{exc}: no request for {entry.name} is seen in the cloud; the next run looks again"
                self.log.error("cloud_quota.request_unknown", quota=entry.name, error=str(exc))
                return RequestResult(item, "failed", message)
            request = found
        except CloudError as exc:
            self.log.error("cloud_quota.request_failed", quota=entry.name, error=str(exc))
            return RequestResult(item, "failed", str(exc))
        record = asked(item, request, self.now)
        self.backoff.call(lambda: self.ports.store.save(entry.name, record))
        # Each fact once: the reason says the limit and the target, the demand how the target was counted.
        message = (
            f"Asked for {value} {item.unit} for {entry.name} in {entry.where} (request {request.id},"
            f" {request.status}): {item.reason}" + (f"; demand {item.demand}" if item.demand else "")
        )
        self.log.info(
            "cloud_quota.requested",
            quota=entry.name,
            scope=entry.where,
            value=value,
            request_id=request.id,
            status=request.status,
            **dict(request.ids),
        )
        self._emit(entry.name, "QuotaRequested", message)
        return RequestResult(item, "requested", message, request)

    def failed(self, item: QuotaPlan, message: str, error: BaseException | None = None) -> RequestResult:
        self.log.error("cloud_quota.failed", quota=item.entry.name, error=message)  # not done: a stop, a deadline
        return RequestResult(item, "failed", message)

    # --- internals ----------------------------------------------------------------------------------------------

    def _facts(self, entry: CloudQuota, remembered: Asked | None) -> QuotaFacts:
        try:
            return self.backoff.call(lambda: self.ports.cloud.read(entry, remembered))
        except CloudError as exc:  # that entry cannot be judged; the others go on
            self.log.error("cloud_quota.unreadable", quota=entry.name, error=str(exc))
            return QuotaFacts("", None, error=f"the quota cannot be read: {exc}")

    def _demand(self, entry: CloudQuota) -> Demand:
        target = entry.target
        if isinstance(target, int):
            return Demand()
        try:
            groups: dict[str, GroupSize | str] = {}
            if isinstance(target, NodeGroupsTarget):
                for name in target.node_groups:
                    group = self.policy.group(name)
                    found = self.backoff.call(lambda g=group: self.ports.cloud.group(g))  # type: ignore[misc]
                    # The policy's working maximum when it gives one (what the PR says), else the live max size.
                    if isinstance(found, GroupSize) and group.up is not None:
                        found = found.at_policy_max(group.up.max)
                    groups[name] = found
                names = sorted({g.shape for g in groups.values() if isinstance(g, GroupSize)})
            else:
                names = [target.shape]
            shapes: dict[str, Shape | str] = dict(self.backoff.call(lambda: self.ports.cloud.shapes(entry, names)))
        except CloudError as exc:
            self.log.error("cloud_quota.conversion_unreadable", quota=entry.name, error=str(exc))
            return Demand(error=f"the conversion data cannot be read: {exc}")
        return demand_of(entry, groups, shapes)

    def _found_again(self, entry: CloudQuota, exc: CloudError) -> CloudRequest | None:
        """After a lost answer (or "one is open already"): the open request the cloud shows now, if any."""
        self.log.warning("cloud_quota.looking_again", quota=entry.name, error=str(exc))
        try:
            facts = self.backoff.call(lambda: self.ports.cloud.read(entry, None))
        except CloudError as again:
            self.log.error("cloud_quota.unreadable", quota=entry.name, error=str(again))
            return None
        return facts.open_request

    def _tell(self, item: QuotaPlan, record: Asked, request: CloudRequest | None) -> None:
        entry = item.entry
        what = request.describe() if request is not None else f"request {record.request_id} ({record.status})"
        figures = f"limit {item.limit} {item.unit}, target {item.target}"
        message = f"The cloud answered for {entry.name} in {entry.where}: {what}; {figures}"
        self.log.info(
            "cloud_quota.outcome",
            quota=entry.name,
            request_id=record.request_id,
            status=record.status,
            outcome=record.outcome,
            **(dict(request.ids) if request else {}),
        )
        self._emit(entry.name, REASONS[record.outcome], message, warning=record.outcome in ("denied", "partial"))

    def _emit(self, entry: str, reason: str, message: str, *, warning: bool = False) -> None:
        self.ports.events.emit(self.ports.store.ref(entry), reason, message, "Warning" if warning else "Normal")


# --- the job's view of one scope's envelope ---------------------------------------------------------------------


#: One account's report, as this job reads it: a row per entry, ``state`` its contract's action ("error" for a
#: request that failed).
Row = PlanRow[QuotaPlan, RequestResult]
CloudQuotaReport = ScopeRows[Row]
Envelope = ScopeReport[CloudQuotasPlan, RequestResult]


def report_of(envelope: Envelope) -> CloudQuotaReport:
    return plan_rows(envelope, lambda p: p.entry.name, lambda p: (p.action, p.reason, p.failed), "error")


def request_of(row: Row) -> CloudRequest | None:
    """The request a row shows: the one made, else the one planned."""
    return (row.result.request if row.result is not None else None) or row.plan.request
