"""The one report every job makes, owned by the runner's side: one item result, one scope result, one tally, one
text renderer and one JSON envelope. A job supplies only what is specific to it: for each scope its items (with a
``kind`` and the detail a tool reads) and the rows a person reads under the scope's headline.

``--output json`` is one line for every job with the same top-level keys (``ENVELOPE_KEYS``), described by
:func:`schema` (``gpu-jobs schema --output``) and docs/output.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, Protocol, TypeVar, get_args

from jobs.outcome import ExitCode, Outcome
from jobs.report_text import fit_text, headline, nothing_done, refused, run_refused
from jobs.runner import ScopeReport, State, Tally
from jobs.scopes import Scope

#: The envelope's version: a change a parser must know of (a key gone or renamed) makes it v2.
API_VERSION = "gpu-jobs/v1"
SCHEMA_ID = "https://gpu-jobs.dev/schemas/output-v1.json"
ENVELOPE_KEYS = ("apiVersion", "job", "at", "dryRun", "exitCode", "counts", "scopes", "items")

ItemStatus = Literal["planned", "applied", "unchanged", "skipped", "failed", "refused"]
STATUSES: tuple[str, ...] = get_args(ItemStatus)
#: What an item is, for a tool that reads several jobs' output.
KINDS = (
    "node group",
    "record",
    "namespace quota",
    "cloud quota",
    "pod",
    "unallocated GPU",
    "instance",
    "warning",
    "wake",
)
STATES: tuple[str, ...] = get_args(State)

T = TypeVar("T")  # a job's row: one item of its plan with what became of it
P = TypeVar("P")  # one item of a plan
R = TypeVar("R")  # what became of one item


@dataclass(frozen=True)
class ScopeRows(Generic[T]):
    """One scope's report from the runner as a job reads it: the runner's facts and the job's rows."""

    scope: Scope
    at: datetime
    dry_run: bool
    state: State
    rows: tuple[T, ...] = ()
    reason: str | None = None  # refused, locked (the holder), failed


def rows_of(envelope: ScopeReport[Any, Any], rows: Iterable[T]) -> ScopeRows[T]:
    return ScopeRows(envelope.scope, envelope.at, envelope.dry_run, envelope.state, tuple(rows), envelope.reason)


def with_results(
    plans: Iterable[P], results: Iterable[R], key: Callable[[P], Hashable], of: Callable[[R], P]
) -> list[tuple[P, R | None]]:
    """Each planned item with its result, None where it has none (a dry run, refused, locked, failed, or an item
    that writes nothing)."""
    done = {key(of(r)): r for r in results}
    return [(p, done.get(key(p))) for p in plans]


def rows_with_results(
    envelope: ScopeReport[Any, R],
    plans: Iterable[P],
    key: Callable[[P], Hashable],
    of: Callable[[R], P],
    row: Callable[[P, R | None], T],
) -> ScopeRows[T]:
    """A scope's rows: ``row`` of each planned item and its result (None where it has none)."""
    return rows_of(envelope, (row(p, r) for p, r in with_results(plans, envelope.results, key, of)))


class Written(Protocol):
    """What became of one planned item's write (a cloud quota's request, an instance's stop): the plan it was of."""

    @property
    def plan(self) -> Any: ...

    @property
    def status(self) -> str: ...

    @property
    def message(self) -> str: ...


W = TypeVar("W", bound=Written)


@dataclass(frozen=True)
class PlanRow(Generic[P, W]):
    """One row of a job whose every item is one plan with at most one write (a cloud quota, an instance): the plan,
    what became of its write (None: none was made), the word a person reads for it, the message, and whether it
    failed."""

    plan: P
    result: W | None
    state: str
    message: str
    failed: bool


def plan_rows(
    envelope: ScopeReport[Any, W],
    key: Callable[[P], Hashable],
    words: Callable[[P], tuple[str, str, bool]],
    failed: str,
) -> ScopeRows[PlanRow[P, W]]:
    """A scope's rows for such a job. ``words``: an item's (state, reason, failed) as planned; a write that failed
    is ``failed`` with its message, a write made keeps the planned state with the write's message."""
    plans: Sequence[P] = envelope.plan.plans if envelope.plan is not None else ()

    def row(plan: P, result: W | None) -> PlanRow[P, W]:
        state, reason, planned_failed = words(plan)
        if result is None:
            return PlanRow(plan, None, state, reason, planned_failed)
        if result.status == "failed":
            return PlanRow(plan, result, failed, result.message, True)
        return PlanRow(plan, result, state, result.message, planned_failed)

    return rows_with_results(envelope, plans, key, lambda r: r.plan, row)


@dataclass(frozen=True)
class ItemResult:
    """One item of a scope as the run leaves it: planned (a dry run, or not done: another run holds the Lease),
    applied, unchanged (already as it should be), skipped (left alone on purpose, the reason says why), failed or
    refused (over the limit), with the reason a person reads."""

    kind: str  # one of KINDS
    name: str
    status: ItemStatus
    reason: str | None = None
    write: bool = False  # the plan made a write of it: counted as planned, whatever became of it
    detail: Mapping[str, Any] = field(default_factory=dict)  # what is specific to the job, in the JSON's words


@dataclass(frozen=True)
class ScopeResult:
    """What happened in one scope, for every job: the runner's state and reason, the job's items and rows."""

    job: str
    scope: Scope
    at: datetime
    dry_run: bool
    state: State
    reason: str | None = None
    items: tuple[ItemResult, ...] = ()
    rows: tuple[str, ...] = ()  # the lines a person reads under the headline (the job's columns)
    warnings: tuple[str, ...] = ()  # about the scope as a whole (a quota over-commit)
    #: The job's line when its plan changes nothing here (``nothing to change: ...``); the renderer prints it only
    #: when nothing failed, so it never stands above a failed row.
    nothing: str | None = None


def result_of(
    job: str,
    envelope: ScopeReport[Any, Any],
    items: Sequence[ItemResult],
    rows: Sequence[str],
    *,
    warnings: Sequence[str] = (),
    nothing: str | None = None,
) -> ScopeResult:
    """A scope's result from the runner's report and the job's items and rows."""
    e = envelope
    return ScopeResult(
        job, e.scope, e.at, e.dry_run, e.state, e.reason, tuple(items), tuple(rows), tuple(warnings), nothing
    )


# --- the one tally ------------------------------------------------------------------------------------------------


def counts(result: ScopeResult) -> dict[str, int]:
    """Items by status; ``planned`` counts every write the plan made (whatever became of it). A scope that failed
    with no failed item of its own (unreadable, its Lease not taken) is one failed item: unknown is never fine."""
    by_status = {status: sum(i.status == status for i in result.items) for status in STATUSES}
    by_status["planned"] = sum(i.write and i.status not in ("skipped", "unchanged") for i in result.items)
    if result.state == "failed" and not by_status["failed"]:
        by_status["failed"] = 1
    return by_status


def tally(result: ScopeResult) -> Tally:
    """What one scope counts for ``run.summary`` and the exit code."""
    c = counts(result)
    return Tally(c["planned"], c["applied"], c["failed"], c["skipped"], refused=result.state == "refused")


def failures(results: Sequence[ScopeResult]) -> tuple[str, ...]:
    """Every failed item as ``name: reason``, and each failed scope with no failed item of its own (the one failed
    item ``counts`` makes of it), for the run's one-line summary."""
    found: list[str] = []
    for r in results:
        own = [f"{i.name}: {i.reason or 'failed'}" for i in r.items if i.status == "failed"]
        if r.state == "failed" and not own:
            own = [f"{r.scope.name}: {r.reason or 'failed'}"]
        found += own
    return tuple(found)


def notes(results: Sequence[ScopeResult]) -> tuple[str, ...]:
    """What the run's one-line summary says beside its counts: the limit's refusal (once: the same words for every
    scope of a run refused as a whole), and each scope another run holds (nothing done there)."""
    refused = next((r.reason for r in results if r.state == "refused" and r.reason), None)
    held = [
        f"{r.scope.kind} {r.scope.name} left to the run holding its lease ({r.reason})"
        for r in results
        if r.state == "locked"
    ]
    return (*([f"refused: {refused}; nothing changed"] if refused else []), *held)


# --- the one text renderer ----------------------------------------------------------------------------------------


def failed(result: ScopeResult) -> bool:
    """Whether anything of the scope failed: the scope itself, or one of its items."""
    return result.state == "failed" or any(i.status == "failed" for i in result.items)


def scope_text(result: ScopeResult, *, refusal_said: bool = False) -> str:
    """A scope's block: the headline, what stopped it (another run's Lease, a failure, the limit: unless the run
    said it once above every scope), the job's rows."""
    lines = [headline(result.job, result.scope.kind, result.scope.name, result.at, result.dry_run)]
    locked = result.reason if result.state == "locked" else None
    error = result.reason if result.state == "failed" else None
    if stop := nothing_done(locked, error):
        lines.append(stop)
        if not result.rows:  # never "nothing to do" beneath a failure
            return "\n".join(fit_text(line) for line in lines) + "\n"
    if result.state == "refused" and result.reason and not refusal_said:
        lines.append(refused(result.reason))
    if result.nothing and result.state != "locked" and not failed(result):
        lines.append(f"  {result.nothing}")
    lines = [fit_text(line) for line in lines]  # the frame's lines; a job's rows fit their own columns
    lines += result.rows
    lines += [fit_text(f"  warning: {w}") for w in result.warnings]
    return "\n".join(lines) + "\n"


def to_text(results: Sequence[ScopeResult], nothing: str) -> str:
    """Every scope's block; ``nothing`` when the run had no scope. A refusal of the whole run (over the limit across
    several scopes) is said once, above the scopes' plans, not under each of them."""
    if not results:
        return nothing + "\n"
    reasons = {r.reason for r in results if r.state == "refused" and r.reason}
    if len(results) < 2 or len(reasons) != 1:
        return "".join(scope_text(r) for r in results)
    first = results[0]
    kinds = {r.scope.kind for r in results}
    kind = kinds.pop() if len(kinds) == 1 else "scope"
    head = fit_text(run_refused(first.job, first.at, first.dry_run, reasons.pop(), kind))
    return head + "".join(scope_text(r, refusal_said=True) for r in results)


# --- the one JSON envelope ----------------------------------------------------------------------------------------


def _item(result: ScopeResult, item: ItemResult) -> dict[str, Any]:
    common = {"kind": item.kind, "scope": result.scope.name, "name": item.name, "status": item.status}
    return {**common, "reason": item.reason, **item.detail}


def document(job: str, results: Sequence[ScopeResult], outcome: Outcome) -> dict[str, Any]:
    total = dict.fromkeys(STATUSES, 0)
    scopes = []
    for r in results:
        c = counts(r)
        total = {k: total[k] + c[k] for k in STATUSES}
        scopes.append(
            {
                "kind": r.scope.kind,
                "name": r.scope.name,
                "state": r.state,
                "reason": r.reason,
                "warnings": list(r.warnings),
                "counts": c,
            }
        )
    return {
        "apiVersion": API_VERSION,
        "job": job,
        "at": results[0].at.isoformat() if results else None,
        "dryRun": outcome.dry_run,
        "exitCode": int(outcome.exit_code),
        "counts": total,
        "scopes": scopes,
        "items": [_item(r, i) for r in results for i in r.items],
    }


def to_json(job: str, results: Sequence[ScopeResult], outcome: Outcome) -> str:
    return json.dumps(document(job, results, outcome)) + "\n"  # one line: one record for a log collector


def schema() -> dict[str, Any]:
    """The JSON Schema of the envelope (draft 2020-12). Items say what they are with ``kind``; what follows their
    common keys is the job's, documented in docs/output.md, and may grow within a version."""
    count_object = {
        "type": "object",
        "properties": {s: {"type": "integer", "minimum": 0} for s in STATUSES},
        "required": list(STATUSES),
        "additionalProperties": False,
    }
    nullable_text = {"type": ["string", "null"]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "gpu-jobs report (--output json)",
        "type": "object",
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "job": {"enum": ["nodegroups", "quotas", "cloud-quotas", "sweep"]},
            "at": {"type": ["string", "null"], "format": "date-time"},
            "dryRun": {"type": "boolean"},
            "exitCode": {"enum": [int(c) for c in ExitCode]},
            "counts": count_object,
            "scopes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "kind": {"enum": ["cluster", "account"]},
                        "name": {"type": "string"},
                        "state": {"enum": list(STATES)},
                        "reason": nullable_text,
                        "warnings": {"type": "array", "items": {"type": "string"}},
                        "counts": count_object,
                    },
                    "required": ["kind", "name", "state", "reason", "warnings", "counts"],
                    "additionalProperties": False,
                },
            },
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "kind": {"enum": list(KINDS)},
                        "scope": {"type": "string"},
                        "name": {"type": "string"},
                        "status": {"enum": list(STATUSES)},
                        "reason": nullable_text,
                    },
                    "required": ["kind", "scope", "name", "status", "reason"],
                },
            },
        },
        "required": list(ENVELOPE_KEYS),
        "additionalProperties": False,
    }
