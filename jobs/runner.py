"""The one reconcile loop every job runs on. A job supplies, for one scope (a cluster or a cloud account, see
``jobs.scopes``), how to observe it, a pure plan, how to apply one item and how to count; the runner owns
everything else, once for every job:

    observe + plan every scope  ->  one limit across all scopes  ->  per scope: stop? Lease, look again,
    apply each item (isolated, ``workers`` at once, fenced by the Lease)  ->  one report envelope per scope

- Every scope is planned before anything is written anywhere; a plan over the limit (counted across all scopes)
  changes nothing anywhere (exit 3).
- A dry run, or a plan with nothing to write, never takes the Lease: the plan is the report.
- Under the scope's Lease the job looks again; the plan is made again only when what it sees has changed, and a
  plan that grew is held to the same limit.
- One item's failure (an error or a bug) fails that item only; a bug in observing fails that scope only.
- A stop request (SIGTERM, Ctrl-C) starts nothing new: items not started fail with the same words in every job.
- A cluster scope proves which cluster its API belongs to (its ``witness``) before anything is read that decides or
  anything is written: an API that cannot say, or says another name, fails that scope and changes nothing in it.
- The run's deadline (``jobs.deadline``): once only its reserve is left, no scope, item or write starts (items fail
  ``deadline: not started``); what it cut short fails with a reason starting ``deadline:``; the reports are made.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Literal, Protocol, TypeVar

from jobs.core.limits import DEFAULT_LIMIT, ChangeLimit
from jobs.deadline import NOT_STARTED, Deadline
from jobs.errors import CloudError, DeadlineReached, Stopped
from jobs.lease import HeldLease, RunLock
from jobs.outcome import ExitCode, Outcome
from jobs.scopes import Scope
from jobs.stopping import STOP, stop_on_signals

#: The scopes a run works on at once unless told (``--scopes-at-once``), each with its own ``workers``.
SCOPES_AT_ONCE = 8
#: The words of a stop request, the same in every job.
STOPPED_BEFORE = "not started: the run was asked to stop"

O = TypeVar("O")  # what a scope's observation holds  # noqa: E741
P = TypeVar("P", bound="ScopePlan[Any]")  # a scope's plan
I = TypeVar("I")  # one item of a plan: the unit that succeeds or fails on its own  # noqa: E741
I_co = TypeVar("I_co", covariant=True)
R = TypeVar("R")  # one item's result


class ScopePlan(Protocol[I_co]):
    """What the runner reads of a job's plan."""

    @property
    def items(self) -> Sequence[I_co]:
        """The writes to make, one isolated item each (no-ops already dropped)."""
        ...

    @property
    def changes(self) -> int:
        """How many items count against the change limit."""
        ...

    @property
    def considered(self) -> int:
        """Of how many the plan considered (for a percentage limit)."""
        ...


@dataclass(frozen=True)
class Witnessed:
    """What a cluster's API says of itself: the cluster it names (None: it names none), where that API is (for the
    person who must fix it) and the object that said it."""

    cluster: str | None
    where: str
    source: str


class Witness(Protocol):
    """The cluster behind a scope's Kubernetes API, as that API itself says (``jobs.adapters.kube.identity``)."""

    def witness(self) -> Witnessed: ...


def identity_refusal(scope: Scope, seen: Witnessed) -> str | None:
    """Why ``scope`` must not be worked on through the API that gave ``seen`` (None: it is that cluster)."""
    if seen.cluster == scope.name:
        return None
    if seen.cluster is None:
        return (
            f"cluster {scope.name}: refused before reading anything: {seen.where} has no cluster identity"
            f" (ConfigMap {seen.source}, key cluster), so nothing proves it is {scope.name}. A per-cluster install"
            " creates it when told its cluster; if this API really is "
            f"{scope.name}'s, create it: kubectl -n {seen.source.split('/')[0]} create configmap"
            f" {seen.source.split('/')[1]} --from-literal=cluster={scope.name}"
        )
    return (
        f"cluster {scope.name}: refused before reading anything: {seen.where} is cluster {seen.cluster}"
        f" (ConfigMap {seen.source}), not {scope.name}. Point --cluster / GPU_JOBS_CLUSTER, the kubeContext of"
        f" {scope.name} in the policy, or the current context at {scope.name}'s API"
    )


class ScopePorts(Protocol):
    """What the runner needs of a job's ports: the scope's Lease, and for a cluster scope the ``witness`` made from
    the same API client the job reads and writes through (an account scope has no cluster to prove: None)."""

    @property
    def lock(self) -> RunLock: ...

    @property
    def witness(self) -> Witness | None: ...


class ScopeWork(ABC, Generic[O, P, I, R]):
    """One job's work on one scope, through that scope's own ports. ``plan`` is pure. A cluster scope's ports carry
    its ``witness`` (the command skeleton refuses a cluster scope without one)."""

    ports: ScopePorts

    @property
    def witness(self) -> Witness | None:
        return self.ports.witness

    @property
    def lock(self) -> RunLock:
        """The scope's Lease."""
        return self.ports.lock

    @abstractmethod
    def observe(self, first: O | None) -> O:
        """Read the scope. Under the Lease ``first`` is the observation made before: what does not need reading
        twice (a discovery, a capacity) may be taken from it."""

    @abstractmethod
    def plan(self, observed: O) -> P: ...

    @abstractmethod
    def apply(self, item: I, fence: Callable[[str], None]) -> R:
        """Carry out one item; call ``fence(what)`` before each write (it raises :class:`Stopped`)."""

    @abstractmethod
    def failed(self, item: I, message: str, error: BaseException | None = None) -> R:
        """The result of an item that could not be done for ``message``; ``error`` is what ``apply`` raised part
        way, if it did (the job may have something to say about it: an Event)."""


State = Literal["planned", "applied", "refused", "locked", "failed"]


@dataclass(frozen=True)
class ScopeReport(Generic[P, R]):
    """What happened in one scope: the one envelope every job reports in.

    ``planned``: a dry run, or nothing to write (``results`` empty); ``applied``: the items were carried out under
    the Lease (``results``, one per item); ``refused``: over the limit, nothing changed (``reason``); ``locked``:
    another live run holds the Lease (``reason`` names it), nothing done; ``failed``: the scope could not be read or
    its Lease taken (``reason``), nothing changed (``plan`` is None when nothing could be judged)."""

    scope: Scope
    at: datetime
    dry_run: bool
    state: State
    plan: P | None
    results: tuple[R, ...] = ()
    reason: str | None = None


@dataclass(frozen=True)
class Tally:
    """What one scope's report counts for ``run.summary`` and the exit code. ``failed`` includes items that could
    not be judged (unreadable, unseen): an unknown is a failure, never a skip."""

    planned: int = 0
    applied: int = 0
    failed: int = 0
    skipped: int = 0
    refused: bool = False


def _system_clock() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class RunSettings:
    """What every job's run is told, whatever the job."""

    dry_run: bool = False
    limit: ChangeLimit = DEFAULT_LIMIT
    workers: int = 8  # items applied at once, per scope
    # Scopes observed, planned and applied at once (each with its ``workers``): 1 makes a run serial.
    scopes_at_once: int = SCOPES_AT_ONCE
    holder: str = "gpu-jobs"  # who holds the Lease (the pod and process)
    lease_duration: timedelta = timedelta(minutes=30)
    # The Lease runs on the real clock, not on the schedule's ``now``: a run evaluated ``--at`` another instant must
    # still exclude the runs happening now.
    clock: Callable[[], datetime] = field(default=_system_clock)
    # The run's one deadline (made at its start): what its waits and writes may still use.
    deadline: Deadline = field(default_factory=Deadline.start)


@dataclass
class Reconcile(Generic[O, P, I, R]):
    """Runs one job over its scopes."""

    work: Mapping[Scope, ScopeWork[O, P, I, R]]
    settings: RunSettings
    at: datetime  # the schedule instant the plans are made for
    log: Any
    noun: str = "items"  # what the limit counts ("node groups")
    _allowance: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> list[ScopeReport[P, R]]:
        with stop_on_signals(), ThreadPoolExecutor(max_workers=self._at_once()) as pool:
            planned = dict(zip(self.work, pool.map(self._observe_and_plan, self.work), strict=True))
            plans = {s: f for s, f in planned.items() if not isinstance(f, ScopeReport)}
            self._changes = {s: plan.changes for s, (_, plan) in plans.items()}
            considered = sum(plan.considered for _, plan in plans.values())
            where = f" across {len(self.work)} {_plural(self.work)}" if len(self.work) > 1 else ""
            reason = self.settings.limit.refusal(sum(self._changes.values()), considered, self.noun, where)
            self._allowed = self.settings.limit.allowed(considered)
            if reason is not None:
                self.log.error("run.refused", reason=reason)
                return [
                    f if isinstance(f, ScopeReport) else self._report(s, "refused", f[1], reason=reason)
                    for s, f in planned.items()
                ]
            return list(pool.map(lambda s: self._carry_out(s, planned[s]), self.work))

    def _at_once(self) -> int:
        return max(1, min(len(self.work), self.settings.scopes_at_once))

    def _report(
        self, scope: Scope, state: State, plan: P | None, results: tuple[R, ...] = (), reason: str | None = None
    ) -> ScopeReport[P, R]:
        return ScopeReport(scope, self.at, self.settings.dry_run, state, plan, results, reason)

    def _observe_and_plan(self, scope: Scope) -> tuple[O, P] | ScopeReport[P, R]:
        """Prove the cluster, then observe and plan, before anything is written anywhere."""
        try:
            refusal = self._unproven(scope)
            if refusal is not None:
                self.log.error("scope.wrong_cluster", scope=scope.name, reason=refusal)
                return self._report(scope, "failed", None, reason=refusal)
            observed = self.work[scope].observe(None)
            return observed, self.work[scope].plan(observed)
        except CloudError as exc:
            # Nothing of the scope can be judged, so nothing of it is changed (unknown is never idle).
            self.log.error("scope.unreadable", scope=scope.name, error=str(exc))
            return self._report(scope, "failed", None, reason=f"{scope} cannot be read ({exc})")
        except DeadlineReached as exc:  # its reads took the run's time: nothing judged, nothing changed
            self.log.error("scope.deadline", scope=scope.name, error=str(exc))
            return self._report(scope, "failed", None, reason=str(exc))
        except Exception as exc:  # a bug met in one scope fails that scope, not the scopes beside it
            self.log.error("scope.crashed", scope=scope.name, error=repr(exc), exc_info=True)
            return self._report(scope, "failed", None, reason=f"unexpected error: {exc!r}")

    def _unproven(self, scope: Scope) -> str | None:
        witness = self.work[scope].witness
        return identity_refusal(scope, witness.witness()) if witness is not None else None

    def _carry_out(self, scope: Scope, planned: tuple[O, P] | ScopeReport[P, R]) -> ScopeReport[P, R]:
        """Apply one scope's plan under its Lease (a dry run, or nothing to write: the plan is the report)."""
        if isinstance(planned, ScopeReport):
            return planned
        observed, plan = planned
        if self.settings.dry_run or not plan.items:
            return self._report(scope, "planned", plan)
        work = self.work[scope]
        if STOP.is_set():
            return self._stopped(scope, plan)
        if self.settings.deadline.expired():
            return self._stopped(scope, plan, NOT_STARTED)
        try:
            holder = work.lock.acquire(self.settings.holder, self.settings.clock(), self.settings.lease_duration)
        except CloudError as exc:
            self.log.error("lease.failed", scope=scope.name, error=str(exc))
            return self._report(scope, "failed", plan, reason=f"the Lease could not be taken ({exc})")
        if holder is not None:
            now = self.settings.clock()
            late = holder.overdue(now)
            if late is not None:
                # Its holder missed a renewal: probably killed. Nothing was done here, and that is an alert.
                reason = (
                    f"the Lease is held by {holder.name}, whose renewal is {_seconds(late)} overdue (a killed run?):"
                    f" it is taken over {_seconds(holder.takeover_in(now))} from now"
                )
                self.log.error("lease.overdue", scope=scope.name, holder=holder.name, reason=reason)
                return self._report(scope, "failed", plan, reason=reason)
            self.log.info("lease.held", scope=scope.name, holder=holder.name, message="another run holds the Lease")
            return self._report(scope, "locked", plan, reason=holder.name)
        held = HeldLease(work.lock, self.settings.holder, self.settings.lease_duration, self.log, self.settings.clock)
        try:
            return self._under_lease(scope, work, observed, plan, held)
        finally:
            held.close()

    def _under_lease(
        self, scope: Scope, work: ScopeWork[O, P, I, R], observed: O, plan: P, held: HeldLease
    ) -> ScopeReport[P, R]:
        # Another run may have done part of it while this one waited: look again, plan again only on a change.
        try:
            again = work.observe(observed)
        except CloudError as exc:
            self.log.error("scope.unreadable", scope=scope.name, error=str(exc))
            return self._report(scope, "failed", plan, reason=f"{scope} cannot be read ({exc})")
        except DeadlineReached as exc:
            self.log.error("scope.deadline", scope=scope.name, error=str(exc))
            return self._stopped(scope, plan, NOT_STARTED)
        if again != observed:
            plan = work.plan(again)
            reason = self._still_allowed(scope, plan.changes)
            if reason is not None:
                self.log.error("run.refused", scope=scope.name, reason=reason)
                return self._report(scope, "refused", plan, reason=reason)
        deadline = self.settings.deadline

        def fence(what: str) -> None:
            deadline.check(what)
            held.check(what)

        with ThreadPoolExecutor(max_workers=max(1, self.settings.workers)) as pool:
            results = tuple(pool.map(lambda item: self._item(work, item, fence), plan.items))
        return self._report(scope, "applied", plan, results)

    def _still_allowed(self, scope: Scope, changes: int) -> str | None:
        """A plan made again under the Lease is held to the limit the run was allowed, across all scopes."""
        with self._allowance:
            total = sum(self._changes.values()) - self._changes[scope] + changes
            if total > self._allowed:
                return self.settings.limit.refusal(total, 0, self.noun, " once looked at again under the Lease") or (
                    f"the plan grew to {total} {self.noun} under the Lease, more than the limit of {self._allowed}"
                )
            self._changes[scope] = changes
            return None

    def _item(self, work: ScopeWork[O, P, I, R], item: I, fence: Callable[[str], None]) -> R:
        try:
            if STOP.is_set():
                return work.failed(item, STOPPED_BEFORE)
            if self.settings.deadline.expired():
                return work.failed(item, NOT_STARTED)
            return work.apply(item, fence)
        except (Stopped, DeadlineReached, CloudError) as exc:  # the job logs it with what it was doing (``failed``)
            return work.failed(item, str(exc), exc)
        except Exception as exc:  # one item's failure, whatever it is, must not stop the others
            self.log.error("item.crashed", error=repr(exc), exc_info=True)
            return work.failed(item, f"unexpected error: {exc!r}", exc)

    def _stopped(self, scope: Scope, plan: P, why: str = STOPPED_BEFORE) -> ScopeReport[P, R]:
        work = self.work[scope]
        return self._report(scope, "applied", plan, tuple(work.failed(item, why) for item in plan.items))


def _seconds(delta: timedelta) -> str:
    return f"{max(0, round(delta.total_seconds()))} s"


def _plural(scopes: Mapping[Scope, Any]) -> str:
    kinds = {s.kind for s in scopes}
    return "clusters" if kinds == {"cluster"} else "accounts" if kinds == {"account"} else "scopes"


def outcome(tallies: Sequence[Tally], *, dry_run: bool) -> Outcome:
    """The one exit-code rule: refused (3) over failed (1) over OK (0)."""
    failed = sum(t.failed for t in tallies)
    refused = any(t.refused for t in tallies)
    code = ExitCode.REFUSED if refused else ExitCode.ITEM_FAILED if failed else ExitCode.OK
    return Outcome(
        code,
        planned=sum(t.planned for t in tallies),
        applied=sum(t.applied for t in tallies),
        failed=failed,
        skipped=sum(t.skipped for t in tallies),
        dry_run=dry_run,
    )
