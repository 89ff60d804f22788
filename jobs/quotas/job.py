"""The quotas job on one cluster: observe (one list of namespaces, one of ResourceQuotas), plan (pure), refuse a
plan over the change limit, then apply under the cluster's Lease, each namespace on its own."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from jobs.core.limits import DEFAULT_LIMIT, ChangeLimit
from jobs.core.policy import Policy
from jobs.core.quotas import (
    Capacity,
    NamespaceInfo,
    QuotaEntry,
    QuotaInfo,
    node_capacity,
    over_commit,
    plan_quotas,
    policy_capacity,
)
from jobs.errors import CloudError, Conflict
from jobs.lease import STOP, HeldLease, RunLock, Stopped
from jobs.retry import Backoff
from jobs.runner import Early, Tally

Status = Literal["planned", "applied", "unchanged", "failed", "refused", "conflict"]


class QuotaStore(Protocol):
    def namespaces(self) -> list[NamespaceInfo]: ...

    def quotas(self) -> list[QuotaInfo]: ...

    def apply(self, namespace: str, name: str, hard: dict[str, str]) -> None: ...

    def delete(self, namespace: str, name: str) -> None: ...

    def gpu_allocatable(self) -> dict[str, int]:
        """GPUs allocatable on the cluster's nodes now, per resource name (``nvidia.com/gpu``: 16)."""
        ...


class QuotaEvents(Protocol):
    def emit(self, namespace: str, name: str, reason: str, message: str, *, warning: bool = False) -> None: ...


@dataclass(frozen=True)
class Ports:
    store: QuotaStore
    lock: RunLock
    events: QuotaEvents


@dataclass(frozen=True)
class Settings:
    cluster: str
    dry_run: bool = False
    limit: ChangeLimit = DEFAULT_LIMIT
    holder: str = "gpu-jobs"
    lease_duration: timedelta = timedelta(minutes=30)
    # Every call here is idempotent (lists, server-side apply, delete of what may be gone): resent on throttling,
    # 5xx and timeouts alike.
    backoff: Backoff = field(default_factory=lambda: Backoff(deadline_s=120))
    workers: int = 8  # quotas written at once: a first run over thousands of namespaces is bound by round trips


@dataclass(frozen=True)
class Outcome:
    entry: QuotaEntry
    status: Status
    message: str = ""


@dataclass(frozen=True)
class Report:
    cluster: str
    at: datetime
    dry_run: bool
    results: tuple[Outcome, ...] = ()
    refused: str | None = None
    lock_holder: str | None = None
    error: str | None = None  # the cluster could not be read: nothing judged, nothing changed
    warnings: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Planned:
    entries: tuple[QuotaEntry, ...]
    capacity: Capacity  # what the cluster can give its quotas, measured once per run
    warnings: tuple[str, ...] = ()  # for the cluster as a whole (over-commit)

    @property
    def changes(self) -> int:
        return sum(e.action != "unchanged" for e in self.entries)


def _observe_and_plan(
    policy: Policy, now: datetime, settings: Settings, ports: Ports, capacity: Capacity | None = None
) -> Planned:
    namespaces = settings.backoff.call(ports.store.namespaces)
    quotas = settings.backoff.call(ports.store.quotas)
    entries = plan_quotas(policy, settings.cluster, namespaces, quotas, now)
    # The policy's node groups at their working maximum when it gives their sizes (night or day alike); else the
    # nodes' allocatable GPUs now, one more list (not again when the plan is made again under the Lease).
    capacity = (
        capacity
        or policy_capacity(policy, settings.cluster)
        or node_capacity(settings.backoff.call(ports.store.gpu_allocatable))
    )
    return Planned(entries, capacity, over_commit(entries, capacity))


@dataclass(frozen=True)
class ClusterRun:
    """The quotas job on one cluster, as the shared runner drives it."""

    policy: Policy
    now: datetime
    settings: Settings
    ports: Ports
    log: Any
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def plan(self) -> Planned | Early[Report]:
        try:
            planned = _observe_and_plan(self.policy, self.now, self.settings, self.ports)
        except CloudError as exc:
            self.log.error("cluster.unreachable", cluster=self.settings.cluster, error=str(exc))
            return Early(self.failed(f"cluster {self.settings.cluster} cannot be read ({exc})"))
        reason = self.settings.limit.refusal(planned.changes, len(planned.entries), "namespace quotas")
        if reason is not None:
            return Early(self.refused(reason, planned))
        return planned

    def changes(self, planned: Planned) -> tuple[int, int]:
        return planned.changes, len(planned.entries)

    def failed(self, message: str) -> Report:
        return Report(self.settings.cluster, self.now, self.settings.dry_run, error=message)

    def refused(self, reason: str, planned: Planned | None) -> Report:
        entries = planned.entries if planned is not None else ()
        results = tuple(Outcome(e, "refused" if e.action != "unchanged" else "unchanged") for e in entries)
        return Report(self.settings.cluster, self.now, self.settings.dry_run, results, refused=reason)

    def apply(self, planned: Planned) -> Report:
        report = Report(self.settings.cluster, self.now, self.settings.dry_run)
        report = replace(report, warnings=planned.warnings)
        if self.settings.dry_run or not planned.changes:
            results = tuple(Outcome(e, "planned" if e.action != "unchanged" else "unchanged") for e in planned.entries)
            return replace(report, results=results)
        if STOP.is_set():
            return replace(report, error="the run was asked to stop before it took the Lease")
        try:
            holder = self.ports.lock.acquire(self.settings.holder, self.clock(), self.settings.lease_duration)
        except CloudError as exc:
            return replace(report, error=f"the Lease could not be taken ({exc})")
        if holder is not None:
            return replace(report, lock_holder=holder)
        held = HeldLease(self.ports.lock, self.settings.holder, self.settings.lease_duration, self.log, self.clock)
        try:
            # Under the Lease, look again: another run may have done part of it.
            again = _observe_and_plan(self.policy, self.now, self.settings, self.ports, planned.capacity)
            reason = self.settings.limit.refusal(again.changes, len(again.entries), "namespace quotas")
            if reason is not None:
                return self.refused(reason, again)
            # Namespaces at once; one namespace's entries in their order (the new quota before the former one's
            # removal), and none after one that failed, so a namespace is never left without its quota.
            by_namespace: dict[str, list[QuotaEntry]] = {}
            for entry in again.entries:
                by_namespace.setdefault(entry.namespace, []).append(entry)
            with ThreadPoolExecutor(max_workers=self.settings.workers) as pool:
                done = pool.map(lambda entries: self._namespace(entries, held.check), by_namespace.values())
                results = tuple(outcome for outcomes in done for outcome in outcomes)
            return replace(report, results=results, warnings=again.warnings)
        except CloudError as exc:
            return replace(report, error=f"cluster {self.settings.cluster} cannot be read ({exc})")
        finally:
            held.close()

    def _namespace(self, entries: list[QuotaEntry], fence: Callable[[str], None]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for entry in entries:
            if outcomes and outcomes[-1].status in ("failed", "conflict"):
                outcomes.append(Outcome(entry, "failed", f"not attempted: {outcomes[-1].entry.quota} was not written"))
            else:
                outcomes.append(self._one(entry, fence))
        return outcomes

    def _one(self, entry: QuotaEntry, fence: Callable[[str], None]) -> Outcome:
        if entry.action == "unchanged":
            return Outcome(entry, "unchanged")
        where = f"{entry.namespace}/{entry.quota}"
        try:
            fence(f"{entry.action} {where}")
            if entry.action == "delete":
                self.settings.backoff.call(lambda: self.ports.store.delete(entry.namespace, entry.quota))
            else:
                hard = dict(entry.hard)
                self.settings.backoff.call(lambda: self.ports.store.apply(entry.namespace, entry.quota, hard))
        except Conflict as exc:
            # Another field manager owns a field of the quota: reported for this namespace, never forced.
            self.log.warning("quota.conflict", namespace=entry.namespace, quota=entry.quota, error=str(exc))
            return Outcome(entry, "conflict", str(exc))
        except (CloudError, Stopped) as exc:
            self.log.error("quota.failed", namespace=entry.namespace, quota=entry.quota, error=str(exc))
            return Outcome(entry, "failed", str(exc))
        message = f"{entry.action}: {dict(entry.hard) or 'removed'} ({entry.rule})"
        self.log.info(
            "quota.changed", namespace=entry.namespace, quota=entry.quota, action=entry.action, rule=entry.rule
        )
        try:
            self.ports.events.emit(entry.namespace, entry.quota, "QuotaReconciled", message)
        except CloudError as exc:  # an Event is a courtesy
            self.log.warning("event.failed", namespace=entry.namespace, error=str(exc))
        return Outcome(entry, "applied", message)


def tally(report: Report) -> Tally:
    """Conflicts and failures are failed items; a cluster that could not be read is one failed item."""
    changing = [r for r in report.results if r.status != "unchanged"]
    return Tally(
        planned=len(changing),
        applied=sum(r.status == "applied" for r in report.results),
        failed=sum(r.status in ("failed", "conflict") for r in report.results) + (report.error is not None),
        skipped=sum(r.status == "unchanged" for r in report.results),
        refused=report.refused,
    )
