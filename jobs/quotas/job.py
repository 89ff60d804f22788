"""The quotas job on one cluster: observe (one list of namespaces, one of ResourceQuotas), plan (pure), refuse a
plan over the change limit, then apply under the cluster's Lease, each namespace on its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, Protocol

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
    unwritten_status,
)
from jobs.errors import CloudError, Conflict, DeadlineReached, Denied, NotFound, Stopped
from jobs.events import Events, ObjectRef
from jobs.lease import RunLock
from jobs.retry import Backoff
from jobs.runner import ScopeReport, ScopeWork, Witness

Status = Literal["planned", "applied", "unchanged", "failed", "refused", "conflict", "skipped"]


class QuotaStore(Protocol):
    def namespaces(self) -> list[NamespaceInfo]: ...

    def quotas(self) -> list[QuotaInfo]: ...

    def apply(self, namespace: str, name: str, hard: dict[str, str]) -> None: ...

    def delete(self, namespace: str, name: str) -> None: ...

    def gpu_allocatable(self) -> dict[str, int]:
        """GPUs allocatable on the cluster's nodes now, per resource name (``nvidia.com/gpu``: 16)."""
        ...

    def ref(self, namespace: str, name: str) -> ObjectRef:
        """The quota for an Event on it, with the uid this run read or wrote (never a read of its own)."""
        ...


@dataclass(frozen=True)
class Ports:
    store: QuotaStore
    lock: RunLock
    events: Events
    witness: Witness | None = None  # which cluster ``store`` reaches (jobs.runner)


@dataclass(frozen=True)
class QuotasSettings:
    """What the quotas job on one cluster is told beyond the run's settings (``RunSettings``, which the runner
    reads: dry run, limit, workers, Lease)."""

    cluster: str
    # Every call here is idempotent (lists, server-side apply, delete of what may be gone): resent on throttling,
    # 5xx and timeouts alike.
    backoff: Backoff = field(default_factory=lambda: Backoff(deadline_s=120))


@dataclass(frozen=True)
class EntryResult:
    """What became of one quota entry (a namespace's quota) in this run."""

    entry: QuotaEntry
    status: Status
    message: str = ""


@dataclass(frozen=True)
class QuotaReport:
    cluster: str
    at: datetime
    dry_run: bool
    results: tuple[EntryResult, ...] = ()
    refused: str | None = None
    lock_holder: str | None = None
    error: str | None = None  # the cluster could not be read: nothing judged, nothing changed
    warnings: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Observation:
    namespaces: tuple[NamespaceInfo, ...]
    quotas: tuple[QuotaInfo, ...]
    capacity: Capacity  # what the cluster can give its quotas, measured once per run


@dataclass(frozen=True)
class QuotasPlan:
    entries: tuple[QuotaEntry, ...]
    capacity: Capacity
    warnings: tuple[str, ...] = ()  # for the cluster as a whole (over-commit)

    @property
    def items(self) -> tuple[tuple[QuotaEntry, ...], ...]:
        """One item per namespace with something to change: its entries in their order (the new quota before the
        former one's removal), so a namespace is never left without its quota."""
        by_namespace: dict[str, list[QuotaEntry]] = {}
        for entry in self.entries:
            by_namespace.setdefault(entry.namespace, []).append(entry)
        return tuple(tuple(e) for e in by_namespace.values() if any(x.writes for x in e))

    @property
    def changes(self) -> int:
        # A conflict or an unreadable quota writes nothing: it counts neither against the limit nor for the Lease.
        return sum(e.writes for e in self.entries)

    @property
    def considered(self) -> int:
        return len(self.entries)


Namespace = tuple[QuotaEntry, ...]


@dataclass(frozen=True)
class QuotasWork(ScopeWork[Observation, QuotasPlan, Namespace, tuple[EntryResult, ...]]):
    """The quotas job on one cluster, as the runner drives it."""

    policy: Policy
    now: datetime
    settings: QuotasSettings
    ports: Ports
    log: Any

    def observe(self, first: Observation | None) -> Observation:
        store, call = self.ports.store, self.settings.backoff.call
        # Under the Lease only the quotas are read again (what another run writes): the namespaces of seconds ago
        # stand (one deleted since is a skip at its write, one created since is the next run's), so a first run over
        # N namespaces lists them in ceil(N/500) calls, not twice that.
        namespaces = first.namespaces if first is not None else tuple(call(store.namespaces))
        quotas = tuple(call(store.quotas))
        # The policy's node groups at their working maximum when it gives their sizes (night or day alike); else the
        # nodes' allocatable GPUs now, one more list (not again under the Lease).
        capacity = (
            first.capacity
            if first is not None
            else policy_capacity(self.policy, self.settings.cluster) or node_capacity(call(store.gpu_allocatable))
        )
        return Observation(namespaces, quotas, capacity)

    def plan(self, observed: Observation) -> QuotasPlan:
        entries = plan_quotas(
            self.policy, self.settings.cluster, list(observed.namespaces), list(observed.quotas), self.now
        )
        for entry in entries:
            _unwritten(entry, self.log)  # say what the plan found that it will not write (conflicts, failures)
        return QuotasPlan(entries, observed.capacity, over_commit(entries, observed.capacity))

    def apply(self, item: Namespace, fence: Callable[[str], None]) -> tuple[EntryResult, ...]:
        outcomes: list[EntryResult] = []
        for entry in item:  # none after one that failed: the namespace keeps the quota it had
            if outcomes and outcomes[-1].status in ("failed", "conflict"):
                outcomes.append(self._failed(entry, f"not attempted: {outcomes[-1].entry.quota} was not written"))
            else:
                outcomes.append(self._one(entry, fence))
        return tuple(outcomes)

    def failed(self, item: Namespace, message: str, error: BaseException | None = None) -> tuple[EntryResult, ...]:
        return tuple(self._failed(e, message) if e.writes else _unwritten(e) for e in item)

    def _failed(self, entry: QuotaEntry, message: str) -> EntryResult:
        """A write that was not made (a stop, a deadline, an earlier failure): said in the log as in the report."""
        self.log.error("quota.failed", namespace=entry.namespace, quota=entry.quota, error=message)
        return EntryResult(entry, "failed", message)

    def _one(self, entry: QuotaEntry, fence: Callable[[str], None]) -> EntryResult:
        if not entry.writes:
            return _unwritten(entry)
        where = f"{entry.namespace}/{entry.quota}"
        try:
            fence(f"{entry.action} {where}")
            if entry.action == "delete":
                self.settings.backoff.call(lambda: self.ports.store.delete(entry.namespace, entry.quota))
            else:
                hard = dict(entry.hard)
                self.settings.backoff.call(lambda: self.ports.store.apply(entry.namespace, entry.quota, hard))
        except (NotFound, Denied) as exc:
            if not _namespace_gone(exc, entry.namespace):
                self.log.error("quota.failed", namespace=entry.namespace, quota=entry.quota, error=str(exc))
                return EntryResult(entry, "failed", str(exc))
            # Deleted (or being deleted) since it was listed: there is no quota to keep there any more.
            self.log.info("quota.namespace_gone", namespace=entry.namespace, quota=entry.quota, error=str(exc))
            return EntryResult(entry, "skipped", f"namespace {entry.namespace} is gone or terminating: nothing to do")
        except Conflict as exc:
            # Another field manager owns a field of the quota: reported for this namespace, never forced.
            self.log.warning("quota.conflict", namespace=entry.namespace, quota=entry.quota, error=str(exc))
            return EntryResult(entry, "conflict", str(exc))
        except (CloudError, Stopped, DeadlineReached) as exc:
            self.log.error("quota.failed", namespace=entry.namespace, quota=entry.quota, error=str(exc))
            return EntryResult(entry, "failed", str(exc))
        done = {"create": "Created", "update": "Updated", "delete": "Deleted"}[entry.action]
        message = f"{done} the GPU quota: {entry.change()} (rule {entry.rule})"
        self.log.info(
            "quota.changed", namespace=entry.namespace, quota=entry.quota, action=entry.action, rule=entry.rule
        )
        self.ports.events.emit(self.ports.store.ref(entry.namespace, entry.quota), "QuotaReconciled", message)
        return EntryResult(entry, "applied", message)


def _namespace_gone(exc: CloudError, namespace: str) -> bool:
    """A write refused because its namespace was deleted after the lists (404 on the namespace) or is being deleted
    (403 with cause NamespaceTerminating, from the NamespaceLifecycle admission plugin)."""
    text = str(exc)
    if isinstance(exc, NotFound):
        return f'namespaces "{namespace}" not found' in text
    return "NamespaceTerminating" in text or "because it is being terminated" in text


Envelope = ScopeReport[QuotasPlan, tuple[EntryResult, ...]]


def report_of(envelope: Envelope) -> QuotaReport:
    """The quotas view of one cluster's envelope: what the text and JSON reports render."""
    report = QuotaReport(envelope.scope.name, envelope.at, envelope.dry_run)
    planned = envelope.plan
    if planned is None:
        return replace(report, error=envelope.reason)
    report = replace(report, warnings=planned.warnings)
    if envelope.state == "locked":
        return replace(report, lock_holder=envelope.reason)
    if envelope.state == "failed":
        return replace(report, error=envelope.reason)
    status: Status = "refused" if envelope.state == "refused" else "planned"
    done = {(o.entry.namespace, o.entry.quota): o for outcomes in envelope.results for o in outcomes}
    results = tuple(
        done.get((e.namespace, e.quota)) or (EntryResult(e, status) if e.writes else _unwritten(e))
        for e in _by_namespace(planned.entries)
    )
    return replace(report, results=results, refused=envelope.reason if envelope.state == "refused" else None)


def _unwritten(entry: QuotaEntry, log: Any = None) -> EntryResult:
    """An entry that writes nothing: unchanged, or a conflict or failure the plan found (with its reason)."""
    status = unwritten_status(entry)
    if log is not None and status != "unchanged":
        log.warning(f"quota.{status}", namespace=entry.namespace, quota=entry.quota, error=entry.reason)
    return EntryResult(entry, status, entry.reason)


def _by_namespace(entries: tuple[QuotaEntry, ...]) -> list[QuotaEntry]:
    grouped: dict[str, list[QuotaEntry]] = {}
    for entry in entries:
        grouped.setdefault(entry.namespace, []).append(entry)
    return [e for group in grouped.values() for e in group]
