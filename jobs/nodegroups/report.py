"""The nodegroups job's report: a table a person reads at a glance (a block per cluster), or one JSON document for
tools, every entry naming its cluster."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from jobs.core.group_config import GroupConfig
from jobs.core.orphan_records import OrphanRecord
from jobs.nodegroups.job import GroupResult, Report
from jobs.report_text import headline, nothing_done, refused


def _size(config: GroupConfig) -> str:
    desired = "?" if config.desired is None else str(config.desired)
    text = f"{config.min}/{desired}/{config.max}"
    if config.autoscaling:
        text += " autoscaled"
    if config.stopped:
        text += " stopped"
    return text


def to_text(reports: Sequence[Report]) -> str:
    if not reports:
        return "gpu-jobs nodegroups: no cluster to act on (the policy has no node groups in reach)\n"
    return "".join(_text(report) for report in reports)


def _text(report: Report) -> str:
    lines = [headline("nodegroups", report.cluster, report.at, report.dry_run)]
    if stop := nothing_done(report.lock_holder):
        return "\n".join([*lines, stop]) + "\n"
    if report.refused:
        lines.append(refused(report.refused))
    elif not report.results and not report.skips and not any(o.failed for o in report.orphans):
        # Never above a failed, postponed or busy group: those are listed below instead.
        lines.append("  nothing to change: every node group is where the schedule wants it")
    width = max([len(r.group) for r in report.results] + [len(o.group.name) for o in report.observed] + [10])
    for r in report.results:
        a = r.action
        if a is None:
            lines.append(f"  {r.group:<{width}}  {r.status:<8} {r.message}")
            continue
        change = f"{_size(a.before)} -> {_size(a.after)}"
        lines.append(f"  {r.group:<{width}}  {a.kind:<4} {a.direction:<5} {r.status:<8} {change:<34} {a.reason}")
        if r.status == "failed":
            lines.append(f"  {'':<{width}}  error: {r.message}")
        for pod in a.evict:
            lines.append(f"  {'':<{width}}  drains {pod} on {pod.node}")
        for pod in a.doomed:
            lines.append(f"  {'':<{width}}  force: {pod} on {pod.node} goes down with its node")
    mentioned = {r.group for r in report.results} | {s.group for s in report.skips}
    quiet = [o for o in report.observed if o.group.name not in mentioned and o.config is not None]
    for o in quiet:
        assert o.config is not None
        lines.append(f"  {o.group.name:<{width}}  {o.kind:<4} {'ok':<14} {_size(o.config):<34} as the schedule wants")
    if report.results or quiet:
        lines.append("  (sizes are min/desired/max; ? = the provider does not report it)")
    failed = [s for s in report.skips if s.failed]
    if failed:
        lines.append("  failed:")
        lines += [f"    {s.group}: {s.reason}" for s in failed]
    if len(failed) < len(report.skips):
        lines.append("  skipped:")
        lines += [f"    {s.group}: {s.reason}" for s in report.skips if not s.failed]
    if report.unmanaged:
        lines.append("  GPU node groups in the clouds with no schedule in the policy:")
        lines += [f"    {u.cloud} {'/'.join(u.locator.values())} ({u.instance_type})" for u in report.unmanaged]
    lines += _orphans_text(report.orphans)
    return "\n".join(lines) + "\n"


def _orphans_text(orphans: Sequence[OrphanRecord]) -> list[str]:
    if not orphans:
        return []
    lines = ["  records of node groups the policy no longer names:"]
    for o in orphans:
        if o.record is None or o.identity is None:
            lines.append(f"    {o.reason}")
            lines.append(f"      {o.delete}")
            continue
        record = o.record
        since = "down" if record.phase == "down" else f"phase {record.phase}"
        lines.append(
            f"    {o.identity.describe()}: {since}, recorded {record.recorded_at.isoformat()},"
            f" restores {_size(record.config)} (ConfigMap {o.name})"
        )
        if not o.failed:
            lines.append(f"      {o.reason}; drop it with: {o.delete}")
            continue
        lines.append(f"      {o.reason}")
        lines.append("      restore it (or put it back in the policy: the next run restores it from this record):")
        lines += [f"        {command}" for command in o.restore]
        lines.append(f"      then drop the record: {o.delete}")
    return lines


def _orphan(o: OrphanRecord, cluster: str | None) -> dict[str, Any]:
    record = o.record
    return {
        "cluster": cluster,
        "record": o.name,
        "namespace": o.namespace,
        "describes": o.identity.to_json() if o.identity else None,
        "phase": record.phase if record else None,
        "recordedAt": record.recorded_at.isoformat() if record else None,
        "restores": record.config.to_json() if record else None,
        "failed": o.failed,
        "reason": o.reason,
        "restore": list(o.restore),
        "deleteRecord": o.delete,
    }


def to_json(reports: Sequence[Report]) -> str:
    """One document for the whole run; ``clusters`` says per cluster whether it was refused or locked."""
    doc: dict[str, Any] = {
        "at": reports[0].at.isoformat() if reports else None,
        "dryRun": any(r.dry_run for r in reports),
        "refused": next((r.refused for r in reports if r.refused), None),
        "lockHolder": next((r.lock_holder for r in reports if r.lock_holder), None),
        "clusters": [{"name": r.cluster, "refused": r.refused, "lockHolder": r.lock_holder} for r in reports],
        "nodeGroups": [_result(r, report.cluster) for report in reports for r in report.results],
        "skipped": [
            {"name": s.group, "cluster": report.cluster, "reason": s.reason, "warning": s.warning, "failed": s.failed}
            for report in reports
            for s in report.skips
        ],
        "unmanaged": [
            {"cloud": u.cloud, "cluster": report.cluster, "locator": dict(u.locator), "instanceType": u.instance_type}
            for report in reports
            for u in report.unmanaged
        ],
        # Added after the first contract: records of groups the policy no longer names (failed unless phase up).
        "orphans": [_orphan(o, report.cluster) for report in reports for o in report.orphans],
    }
    return json.dumps(doc) + "\n"  # one line: one record for a log collector


def _result(r: GroupResult, cluster: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": r.group, "cluster": cluster, "status": r.status, "message": r.message}
    if r.action:
        entry |= {
            "kind": r.action.kind,
            "direction": r.action.direction,
            "reason": r.action.reason,
            "before": r.action.before.to_json(),
            "after": r.action.after.to_json(),
            "steps": [s.describe() for s in r.action.steps],
            "evict": [str(p) for p in r.action.evict],
            "force": [str(p) for p in r.action.doomed],
        }
    return entry
