"""The sweep's report, both parts in one: per scope what was found and done, as text for a person, or the JSON
contract (one line): ``{"at", "dryRun", "pods", "unallocatedGpus", "instances", "scopes"}``.

Each part renders its own scopes into a :class:`Section` (the pods part here, the instances part from
``jobs.sweep.instances``'s rows and lines), so this module knows no part's internals but the pods'."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobs.report_text import headline, nothing_done, refused
from jobs.runner import Tally
from jobs.scopes import Scope
from jobs.sweep.pods import Report as PodsReport
from jobs.sweep.pods import Row
from jobs.sweep.pods import tally as pods_tally


@dataclass(frozen=True)
class Section:
    """One scope of the run, rendered: its rows for the JSON contract and its lines for the text report."""

    scope: Scope
    at: datetime
    dry_run: bool
    state: str  # planned, applied, refused, locked, failed
    reason: str | None
    tally: Tally
    lines: tuple[str, ...] = ()  # its block of the text report, headline first
    pods: tuple[Mapping[str, Any], ...] = ()
    unallocated: tuple[Mapping[str, Any], ...] = ()
    instances: tuple[Mapping[str, Any], ...] = ()


def instances_section(
    scope: Scope,
    at: datetime,
    dry_run: bool,
    state: str,
    reason: str | None,
    tally: Tally,
    rows: Sequence[Mapping[str, Any]],
    lines: Sequence[str],
) -> Section:
    """An account scope's section from what the instances part rendered (its block, headline first)."""
    return Section(scope, at, dry_run, state, reason, tally, tuple(lines), instances=tuple(rows))


# --- the pods part -----------------------------------------------------------------------------------------------


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def pod_row(cluster: str, row: Row) -> dict[str, Any]:
    v = row.verdict
    return {
        "cluster": cluster,
        "namespace": v.pod.namespace,
        "pod": v.pod.name,
        "gpus": v.pod.gpus,
        "utilization": _round(v.utilization, 2),  # percent
        "memoryUsed": _round(v.memory_used, 3),  # 0..1
        "reason": v.reason,
        "state": row.state,
        "action": v.action,
        "message": row.message,
    }


def _pod_lines(report: PodsReport) -> list[str]:
    """The cluster's block of the text report: a headline, what stopped it, then two lines per reported pod."""
    lines = [headline("sweep", report.scope.name, report.at, report.dry_run)]
    locked = report.reason if report.state == "locked" else None
    error = report.reason if report.state == "failed" else None
    if stop := nothing_done(locked, error):
        lines.append(stop)
        if not report.rows:  # never "nothing to do" beneath a failure
            return lines
    if report.state == "refused" and report.reason:
        lines.append(refused(report.reason))
    width = max([len(f"{r.verdict.pod.namespace}/{r.verdict.pod.name}") for r in report.rows] + [10])
    for row in report.rows:
        v = row.verdict
        util = "?" if v.utilization is None else f"{v.utilization:.1f}%"
        memory = f" mem {v.memory_used:.0%}" if v.memory_used is not None else ""
        done = "" if row.status in ("applied", "planned", "none") else f" [{row.status}]"
        gpus = f"{v.pod.gpus} GPU" + ("s" if v.pod.gpus != 1 else "")
        where = f"{v.pod.namespace}/{v.pod.name}"
        # An action not (yet) done says so: a dry run or a refused plan shows what is due, not what happened.
        state = f"{v.action} (due)" if row.state == "acted" and row.status != "applied" else row.state
        lines.append(f"  {where:<{width}}  {state:<12} {gpus:<7} {util}{memory}{done}")
        lines.append(f"  {'':<{width}}  {row.message}")
    if not report.rows:
        lines.append(f"  nothing to do: {report.judged} running GPU pods judged, none idle or marked")
    if report.unallocated:
        nodes = ", ".join(f"{u.node} ({u.gpus})" for u in report.unallocated)
        lines.append(f"  unallocated GPUs (no pod holds them): {sum(u.gpus for u in report.unallocated)} on {nodes}")
    return lines


def pods_section(report: PodsReport) -> Section:
    name = report.scope.name
    return Section(
        report.scope,
        report.at,
        report.dry_run,
        report.state,
        report.reason,
        pods_tally(report),
        tuple(_pod_lines(report)),
        pods=tuple(pod_row(name, r) for r in report.rows),
        unallocated=tuple({"cluster": name, "node": u.node, "gpus": u.gpus} for u in report.unallocated),
    )


# --- the documents -----------------------------------------------------------------------------------------------


def to_text(sections: Sequence[Section]) -> str:
    if not sections:
        return "gpu-jobs sweep: no cluster or account to sweep\n"
    return "".join("\n".join(s.lines) + "\n" for s in sections)


def to_json(sections: Sequence[Section]) -> str:
    document = {
        "at": sections[0].at.isoformat() if sections else None,
        "dryRun": bool(sections and sections[0].dry_run),
        "pods": [row for s in sections for row in s.pods],
        "unallocatedGpus": [row for s in sections for row in s.unallocated],
        "instances": [row for s in sections for row in s.instances],
        "scopes": [{"scope": s.scope.name, "state": s.state, "reason": s.reason} for s in sections],
    }
    return json.dumps(document) + "\n"  # one line: one record for a log collector
