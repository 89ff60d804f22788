"""The sweep's part of the report, both parts: per scope the rows a person reads (two lines per reported pod, one
per reported instance) and one item per pod, unallocated GPU and instance for the envelope (``jobs.envelope``)."""

from __future__ import annotations

from jobs.core.idle_pods import stamp
from jobs.core.untagged import GpuInstance
from jobs.envelope import ItemResult, ItemStatus, ScopeResult
from jobs.report_text import fitted
from jobs.sweep.instances import InstanceReport
from jobs.sweep.instances import Row as InstanceRow
from jobs.sweep.pods import PodsReport
from jobs.sweep.pods import Row as PodRow

#: Pods and instances reported but left alone on purpose: skipped; any other one with nothing to do: unchanged.
LEFT_ALONE = ("unknown", "young", "exempt", "snoozed", "member", "protected")

#: Members of one group shown by name before "and N more".
MEMBERS_SHOWN = 3


# --- the pods part -----------------------------------------------------------------------------------------------


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _pod_status(row: PodRow) -> ItemStatus:
    if row.status != "none":
        return row.status
    return "skipped" if row.state in LEFT_ALONE else "unchanged"


def _snooze(row: PodRow) -> dict[str, str | None] | None:
    """A person's snooze as applied: until when, the value asked, and the cap that shortened it (or null)."""
    s = row.verdict.snooze
    if s is None:
        return None
    return {"until": stamp(s.until), "asked": s.asked, "cappedBy": "sweep.idlePods.maxSnooze" if s.capped else None}


def pod_items(report: PodsReport) -> list[ItemResult]:
    cluster = report.scope.name
    found = [
        ItemResult(
            "pod",
            f"{row.verdict.pod.namespace}/{row.verdict.pod.name}",
            _pod_status(row),
            row.message,
            write=row.verdict.write is not None,
            detail={
                "cluster": cluster,
                "namespace": row.verdict.pod.namespace,
                "pod": row.verdict.pod.name,
                "gpus": row.verdict.pod.gpus,
                "utilization": _round(row.verdict.utilization, 2),  # percent
                "memoryUsed": _round(row.verdict.memory_used, 3),  # 0..1
                "idleReason": row.verdict.reason,
                "state": row.state,
                "action": row.verdict.action,
                "snooze": _snooze(row),
            },
        )
        for row in report.rows
    ]
    return found + [
        ItemResult(
            "unallocated GPU",
            u.node,
            "unchanged",
            "no pod holds them",
            detail={"cluster": cluster, "node": u.node, "gpus": u.gpus},
        )
        for u in report.unallocated
    ]


def pod_rows(report: PodsReport) -> list[str]:
    """Two lines per reported pod, then the GPUs no pod holds."""
    lines = []
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
        lines += fitted(f"  {'':<{width}}  {row.message}", width + 4)
    if report.unallocated:
        nodes = ", ".join(f"{u.node} ({u.gpus})" for u in report.unallocated)
        lines.append(f"  unallocated GPUs (no pod holds them): {sum(u.gpus for u in report.unallocated)} on {nodes}")
    return lines


# --- the instances part ------------------------------------------------------------------------------------------


def _instance_status(row: InstanceRow, state: str) -> ItemStatus:
    if row.failed:
        return "failed"
    if not row.plan.writes:
        return "skipped" if row.state in LEFT_ALONE else "unchanged"
    if state == "applied":
        return "applied"
    return "refused" if state == "refused" else "planned"


def instance_items(report: InstanceReport) -> list[ItemResult]:
    return [
        ItemResult(
            "instance",
            row.plan.instance.id,
            _instance_status(row, report.state),
            row.message,
            write=row.plan.writes,
            detail={
                "cloud": row.plan.instance.cloud,
                "id": row.plan.instance.id,
                "account": report.scope.account,
                "type": row.plan.instance.type,
                "gpus": row.plan.instance.gpus,
                "missingTags": list(row.plan.missing),
                "state": row.state,
                "action": row.plan.action,
            },
        )
        for row in report.rows
    ]


def short_name(instance: GpuInstance) -> str:
    """What a person calls the instance: its id where that is short (AWS ``i-0abc``), else its name (a GCP or Azure
    id is a resource path of 100 to 250 characters; the JSON report keeps it whole)."""
    return instance.id if "/" not in instance.id else instance.name


def instance_rows(report: InstanceReport) -> list[str]:
    """One line per reported instance (wrapped past ``report_text.LINE_WIDTH``), then one block per group whose
    members are reported (a scale set's 29 VMs are one fact: left alone, the group would replace them)."""
    if not report.rows:
        return [] if report.state in ("locked", "failed") else ["  no untagged GPU instances"]
    members: dict[str, list[InstanceRow]] = {}
    alone = []
    for row in report.rows:
        group = row.plan.instance.group
        if row.state == "member" and group is not None:
            members.setdefault(group, []).append(row)
        else:
            alone.append(row)
    lines = []
    if alone:
        ids = max(len(short_name(r.plan.instance)) for r in alone)
        types = max(len(r.plan.instance.type) for r in alone)
    for row in alone:
        instance = row.plan.instance
        state = row.state
        if state == "acted" and row.plan.write and (report.dry_run or report.state != "applied"):
            state = f"{row.plan.write} (due)"
        label = short_name(instance)
        named = f"{instance.name}: " if instance.name not in (instance.id, label) else ""
        line = f"  {label:<{ids}}  {instance.type:<{types}}  {_gpus(instance.gpus):<7} {state:<10} "
        lines += fitted(f"{line}{named}{row.message}", len(line))
    for group, rows in members.items():
        lines += _members(group, rows)
    return lines


def _gpus(n: int) -> str:
    return f"{n} GPU" + ("s" if n != 1 else "")


def _members(group: str, rows: list[InstanceRow]) -> list[str]:
    """One group's reported members: what they are and lack, then a few of their names."""
    first = rows[0].plan.instance
    if len(rows) == 1:
        head = f"  1 instance of {group} ({first.type}, {_gpus(first.gpus)})"
    else:
        types = sorted({r.plan.instance.type for r in rows})
        kind = f"{types[0]}, {_gpus(first.gpus)} each" if len(types) == 1 else ", ".join(types)
        head = f"  {len(rows)} instances of {group} ({kind})"
    lacking = sorted({tag for r in rows for tag in r.plan.missing})
    names = [short_name(r.plan.instance) for r in rows]
    shown = names if len(names) <= MEMBERS_SHOWN + 1 else names[:MEMBERS_SHOWN]
    more = f" and {len(names) - len(shown)} more" if len(shown) < len(names) else ""
    return [
        *fitted(head + (f", missing {', '.join(lacking)}" if lacking else ""), 4),
        *fitted(f"    left alone (the group would replace one stopped on its own): {', '.join(shown)}{more}", 4),
    ]


# --- each part's scope result ------------------------------------------------------------------------------------


def pods_result(report: PodsReport) -> ScopeResult:
    """A cluster's result; a cluster the plan refused to judge (no Prometheus) failed, whatever the runner saw."""
    items, rows = tuple(pod_items(report)), tuple(pod_rows(report))
    # The renderer leaves the line out when the cluster failed (a cluster the plan refused to judge included).
    nothing = None if report.rows else f"nothing to do: {report.judged} running GPU pods judged, none idle or marked"
    r = report
    return ScopeResult("sweep", r.scope, r.at, r.dry_run, r.state, r.reason, items, rows, nothing=nothing)


def instances_result(report: InstanceReport) -> ScopeResult:
    items, rows = tuple(instance_items(report)), tuple(instance_rows(report))
    return ScopeResult("sweep", report.scope, report.at, report.dry_run, report.state, report.reason, items, rows)
