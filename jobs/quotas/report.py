"""The quotas job's report: per namespace what changes and why (a diff a reviewer reads), or the JSON contract."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from jobs.quotas.job import Report
from jobs.report_text import headline, nothing_done, refused


def to_text(reports: Sequence[Report]) -> str:
    if not reports:
        return "gpu-jobs quotas: no cluster to act on\n"
    return "".join(_text(r) for r in reports)


def _text(report: Report) -> str:
    lines = [headline("quotas", report.cluster, report.at, report.dry_run)]
    if stop := nothing_done(report.lock_holder, report.error):
        return "\n".join([*lines, stop]) + "\n"
    if report.refused:
        lines.append(refused(report.refused))
    changing = [r for r in report.results if r.status != "unchanged"]
    if not changing:
        lines.append(f"  nothing to change: {len(report.results)} namespaces have the quota the policy says")
    width = max([len(r.entry.namespace) for r in changing] + [10])
    for r in changing:
        change = r.entry.change()
        lines.append(f"  {r.entry.namespace:<{width}}  {r.entry.action:<7} {r.status:<9} {change}  ({r.entry.rule})")
        if r.message and r.status in ("failed", "conflict"):
            lines.append(f"  {'':<{width}}  error: {r.message}")
    for r in report.results:
        lines += [f"  {r.entry.namespace}: warning: {w}" for w in r.entry.warnings]
    lines += [f"  warning: {w}" for w in report.warnings]
    return "\n".join(lines) + "\n"


def _document(report: Report) -> dict[str, Any]:
    return {
        "cluster": report.cluster,
        "at": report.at.isoformat(),
        "dryRun": report.dry_run,
        "refused": report.refused,
        "lockHolder": report.lock_holder,
        "error": report.error,
        "warnings": list(report.warnings),
        "namespaces": [
            {
                "namespace": r.entry.namespace,
                "quota": r.entry.quota,
                "action": "conflict" if r.status == "conflict" else r.entry.action,
                "status": r.status,
                "message": r.message or None,  # why, for a failure or a conflict; what was done, for a write
                "hard": dict(r.entry.hard),
                "rule": r.entry.rule,
                "warnings": list(r.entry.warnings),
            }
            for r in report.results
        ],
    }


def to_json(reports: Sequence[Report]) -> str:
    """One cluster: its document. Several: ``{"clusters": [...]}``, one document each."""
    if len(reports) == 1:
        return json.dumps(_document(reports[0])) + "\n"  # one line: one record for a log collector
    return json.dumps({"clusters": [_document(r) for r in reports]}) + "\n"
