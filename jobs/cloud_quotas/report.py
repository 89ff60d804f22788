"""The cloud-quotas job's part of the report: per account what each quota is, must be, and what was done about it
(rows a person reads), and one item per cloud quota for the envelope (``jobs.envelope``)."""

from __future__ import annotations

from jobs.cloud_quotas.job import CloudQuotaReport, Row, request_of
from jobs.envelope import ItemResult, ItemStatus

#: What became of an entry that writes nothing: ``none`` (at or above its target), ``pending`` (a request the cloud
#: has not decided: waited for, on purpose).
QUIET: dict[str, ItemStatus] = {"none": "unchanged", "pending": "skipped"}


def rows(report: CloudQuotaReport) -> list[str]:
    lines = []
    width = max([len(r.plan.entry.name) for r in report.rows] + [10])
    for row in report.rows:
        plan = row.plan
        unit = plan.unit or ""
        figures = f"limit {_n(plan.limit)} {unit}, target {_n(plan.target)}" + (f" ({plan.how})" if plan.how else "")
        figures += f", usage {plan.usage}" if plan.usage is not None else ""
        lines.append(f"  {plan.entry.name:<{width}}  {row.state:<8} {figures}")
        if plan.demand:
            lines.append(f"  {'':<{width}}  demand: {plan.demand}")
        if (request := request_of(row)) is not None:
            lines.append(f"  {'':<{width}}  {request.describe()}")
        # Each fact once: the figures, the demand and the request above say what a request or a pending one is;
        # only a failure has more to say.
        if row.message and row.failed:
            lines.append(f"  {'':<{width}}  {'error: ' if row.state == 'error' else ''}{row.message}")
    return lines


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def _status(row: Row, state: str) -> ItemStatus:
    if row.failed:
        return "failed"
    if not row.plan.writes:
        return QUIET.get(row.state, "unchanged")
    if state == "applied":
        return "applied"
    return "refused" if state == "refused" else "planned"


def _item(row: Row, state: str) -> ItemResult:
    plan, request = row.plan, request_of(row)
    detail = {
        "cloud": plan.entry.cloud,
        "account": plan.entry.where,
        "unit": plan.unit or None,
        "limit": plan.limit,
        "usage": plan.usage,
        "target": plan.target,
        "demand": plan.demand,
        "action": row.state,
        "request": None
        if request is None
        else {"id": request.id, "status": request.status, "value": request.value, **dict(request.ids)},
    }
    return ItemResult("cloud quota", plan.entry.name, _status(row, state), row.message, plan.writes, detail)


def items(report: CloudQuotaReport) -> list[ItemResult]:
    return [_item(row, report.state) for row in report.rows]
