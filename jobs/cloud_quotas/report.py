"""The cloud-quotas report: per account what each quota is, must be, and what was done about it; or the JSON
contract ``{"at", "dryRun", "quotas": [...]}`` (one document for every scope of the run)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from jobs.cloud_quotas.job import Report, Row
from jobs.report_text import nothing_done, refused


def to_text(reports: Sequence[Report]) -> str:
    if not reports:
        return "gpu-jobs cloud-quotas: no cloudQuotas in the policy\n"
    return "".join(_text(r) for r in reports)


def _text(report: Report) -> str:
    mode = " (dry run: nothing changed)" if report.dry_run else ""
    lines = [f"gpu-jobs cloud-quotas in account {report.scope.name} at {report.at.isoformat()}{mode}"]
    locked = report.reason if report.state == "locked" else None
    error = report.reason if report.state == "failed" else None
    if not report.rows and (stop := nothing_done(locked, error)):
        return "\n".join([*lines, stop]) + "\n"
    if stop := nothing_done(locked, error):
        lines.append(stop)
    if report.state == "refused" and report.reason:
        lines.append(refused(report.reason))
    width = max([len(r.plan.entry.name) for r in report.rows] + [10])
    for row in report.rows:
        plan = row.plan
        unit = plan.unit or ""
        figures = f"limit {_n(plan.limit)} {unit}, target {_n(plan.target)}" + (f" ({plan.how})" if plan.how else "")
        figures += f", usage {plan.usage}" if plan.usage is not None else ""
        lines.append(f"  {plan.entry.name:<{width}}  {row.action:<8} {figures}")
        if plan.demand:
            lines.append(f"  {'':<{width}}  demand: {plan.demand}")
        if row.request is not None:
            lines.append(f"  {'':<{width}}  {row.request.describe()}")
        # Each fact once: the figures, the demand and the request above say what a request or a pending one is;
        # only a failure has more to say.
        if row.message and row.failed:
            lines.append(f"  {'':<{width}}  {'error: ' if row.action == 'error' else ''}{row.message}")
    return "\n".join(lines) + "\n"


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def _row(row: Row) -> dict[str, Any]:
    plan, request = row.plan, row.request
    return {
        "name": plan.entry.name,
        "cloud": plan.entry.cloud,
        "scope": plan.entry.where,
        "unit": plan.unit or None,
        "limit": plan.limit,
        "usage": plan.usage,
        "target": plan.target,
        "demand": plan.demand,
        "action": row.action,
        "request": None
        if request is None
        else {"id": request.id, "status": request.status, "value": request.value, **dict(request.ids)},
        "message": row.message,
    }


def to_json(reports: Sequence[Report]) -> str:
    at = reports[0].at.isoformat() if reports else None
    document = {
        "at": at,
        "dryRun": bool(reports and reports[0].dry_run),
        "quotas": [_row(row) for r in reports for row in r.rows],
        # Scopes where nothing was done, and why: another run holds the Lease, the limit refused, unreadable.
        "scopes": [{"name": r.scope.name, "state": r.state, "reason": r.reason} for r in reports],
    }
    return json.dumps(document) + "\n"  # one line: one record for a log collector, like every job's
