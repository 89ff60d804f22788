"""The quotas job's part of the report: per namespace what changes and why (a diff a reviewer reads), and one item
per namespace quota for the envelope (``jobs.envelope``)."""

from __future__ import annotations

from jobs.envelope import ItemResult, ItemStatus, ScopeResult, result_of
from jobs.quotas.job import Envelope, QuotaReport, report_of

#: A quota's status in the envelope: a conflict (another field manager owns a field) is a failed item.
STATUS: dict[str, ItemStatus] = {"conflict": "failed"}


def result(envelope: Envelope) -> ScopeResult:
    """The cluster's result for the one report: the runner's state, this job's items, rows and warnings."""
    report = report_of(envelope)
    warnings = () if report.error or report.lock_holder else report.warnings
    return result_of("quotas", envelope, items(report), rows(report), warnings=warnings, nothing=nothing(report))


def nothing(report: QuotaReport) -> str | None:
    """The cluster's line when no namespace's quota changes (the renderer leaves it out when anything failed)."""
    if report.error or report.lock_holder or any(r.status != "unchanged" for r in report.results):
        return None
    n = len(report.results)
    return f"nothing to change: {n} namespace{' has' if n == 1 else 's have'} the quota the policy says"


def rows(report: QuotaReport) -> list[str]:
    if report.error or report.lock_holder:
        return []
    lines = []
    changing = [r for r in report.results if r.status != "unchanged"]
    width = max([len(r.entry.namespace) for r in changing] + [10])
    for r in changing:
        change = r.entry.change()
        lines.append(f"  {r.entry.namespace:<{width}}  {r.entry.action:<7} {r.status:<9} {change}  ({r.entry.rule})")
        if r.message and r.status in ("failed", "conflict"):
            lines.append(f"  {'':<{width}}  error: {r.message}")
    for r in report.results:
        lines += [f"  {r.entry.namespace}: warning: {w}" for w in r.entry.warnings]
    return lines


def items(report: QuotaReport) -> list[ItemResult]:
    return [
        ItemResult(
            "namespace quota",
            f"{r.entry.namespace}/{r.entry.quota}",
            STATUS.get(r.status, r.status),  # type: ignore[arg-type]
            r.message or r.entry.reason or None,  # why, for a failure or a conflict; what was done, for a write
            write=r.entry.writes,
            detail={
                "cluster": report.cluster,
                "namespace": r.entry.namespace,
                "quota": r.entry.quota,
                "action": "conflict" if r.status == "conflict" else r.entry.action,
                "hard": dict(r.entry.hard),
                "rule": r.entry.rule,
                "warnings": list(r.entry.warnings),
            },
        )
        for r in report.results
    ]
