"""The nodegroups job's part of the report: its view of one cluster's envelope, the rows a person reads at a glance
(a table per cluster) and one item per node group, unmanaged group and orphan record for the envelope
(``jobs.envelope``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from jobs.core.group_config import GroupConfig
from jobs.core.group_identity import GroupIdentity
from jobs.core.nodegroup_plan import GroupSkip, ObservedGroup, PodNotice, PodWarning
from jobs.core.nodegroups import CloudGroup
from jobs.core.orphan_records import OrphanRecord
from jobs.core.policy import Policy
from jobs.core.providers import PROVIDERS, ProviderKind, rules_of_identity
from jobs.core.wake import PendingPod
from jobs.envelope import ItemResult, ScopeResult
from jobs.nodegroups.execute import NOT_WARNED, GroupResult, Status, describe_step_change
from jobs.nodegroups.job import Envelope
from jobs.nodegroups.observe import selected_groups
from jobs.nodegroups.settings import NodeGroupsSettings
from jobs.runner import State
from jobs.scopes import cluster


@dataclass(frozen=True)
class NodeGroupsReport:
    """One cluster's envelope as this job reads it."""

    at: datetime
    dry_run: bool
    cluster: str | None = None
    results: tuple[GroupResult, ...] = ()
    skips: tuple[GroupSkip, ...] = ()
    unmanaged: tuple[CloudGroup, ...] = ()
    refused: str | None = None
    lock_holder: str | None = None  # another run holds the lease: nothing done
    observed: tuple[ObservedGroup, ...] = ()  # every group looked at, for the text report's table
    orphans: tuple[OrphanRecord, ...] = ()  # records of groups the policy no longer names
    state: State = "planned"  # the runner's
    reason: str | None = None
    warnings: tuple[tuple[PodWarning, Status], ...] = ()  # shutdown warnings on pods, with what became of each
    notices: tuple[tuple[PodNotice, Status], ...] = ()  # Pending pods told why they woke nothing


def report_of(envelope: Envelope, policy: Policy, settings: NodeGroupsSettings) -> NodeGroupsReport:
    """The nodegroups view of one cluster's envelope."""
    report = partial(
        NodeGroupsReport,
        envelope.at,
        envelope.dry_run,
        envelope.scope.name or None,
        state=envelope.state,
        reason=envelope.reason,
    )
    planned = envelope.plan
    if planned is None:  # nothing could be judged: every group of the cluster failed, nothing changed
        message = f"not judged: {envelope.reason}"
        return report(tuple(GroupResult(g.name, "failed", message) for g in selected_groups(policy, settings)))
    plan, unmanaged = planned.plan, planned.observation.unmanaged
    report = partial(report, observed=planned.observation.groups, orphans=planned.observation.orphans)
    if envelope.state == "locked":
        # Nothing done here: the run holding the Lease reports the orphan records, this one does not fail on them.
        return report(lock_holder=envelope.reason, orphans=())
    if envelope.state in ("refused", "failed", "planned"):
        status: Status = envelope.state
        notices = tuple((n, status) for n in plan.notices)
        report = partial(report, warnings=tuple((w, status) for w in plan.warnings), notices=notices)
    if envelope.state == "refused":
        results = tuple(GroupResult(a.group, "refused", describe_step_change(a), a) for a in plan.actions)
        return report(results, plan.skips, unmanaged, refused=envelope.reason)
    if envelope.state == "failed":
        message = f"not applied: {envelope.reason}"
        return report(tuple(GroupResult(a.group, "failed", message, a) for a in plan.actions), plan.skips, unmanaged)
    if envelope.state == "planned":
        results = tuple(GroupResult(a.group, "planned", describe_step_change(a), a) for a in plan.actions)
        return report(results, plan.skips, unmanaged)
    warned = tuple((r.warning, r.status) for r in envelope.results if r.warning is not None)
    told = tuple((r.notice, r.status) for r in envelope.results if r.notice is not None)
    results = tuple(r for r in envelope.results if r.status != "skipped" and r.warning is None and r.notice is None)
    return report(results, plan.skips, unmanaged, warnings=warned, notices=told)


def result(report: NodeGroupsReport) -> ScopeResult:
    """The cluster's result for the one report: the runner's state, this job's items and rows."""
    return ScopeResult(
        "nodegroups",
        cluster(report.cluster or ""),
        report.at,
        report.dry_run,
        report.state,
        report.reason,
        tuple(items(report)),
        tuple(rows(report)),
        nothing=nothing(report),
    )


def nothing(report: NodeGroupsReport) -> str | None:
    """The cluster's line when nothing changes there (the renderer leaves it out when anything failed)."""
    if report.lock_holder or report.refused or report.results or report.skips:
        return None
    if any(o.failed for o in report.orphans):  # listed below, as failed
        return None
    return "nothing to change: every node group is where the schedule wants it"


def _size(config: GroupConfig, kind: ProviderKind) -> str:
    """A group's size as a person reads it: ``min/desired/max``, ``autoscaled`` where an autoscaler moves it. A GKE
    or AKS group with its autoscaler off is a node count: its min and max are the autoscaler's bounds, unused (AKS
    reports none: ``0/3/0`` read as a max below the size). A stopped pool runs no node: it says what it starts with."""
    if config.limits is not None:  # a Karpenter pool: its limits and its claims
        return config.describe()
    desired = "?" if config.desired is None else str(config.desired)
    zone = " per zone" if config.zones > 1 else ""  # GKE counts per zone of the pool's locations
    if config.autoscaling or PROVIDERS[kind].autoscaler_by_tags:
        text = f"{config.min}/{desired}/{config.max}{zone}" + (" autoscaled" if config.autoscaling else "")
    else:
        text = f"{desired} node{'' if desired == '1' else 's'}{zone}"
    return f"stopped ({text} on start)" if config.stopped else text


def _kind_of(identity: GroupIdentity) -> ProviderKind:
    """The provider of a recorded group, for its size (the provider table's, by its cloud and locator keys)."""
    rules = rules_of_identity(identity.cloud, dict(identity.locator))
    return rules.kind if rules is not None else next(k for k, r in PROVIDERS.items() if r.cloud == identity.cloud)


def rows(report: NodeGroupsReport) -> list[str]:
    """The cluster's rows under its headline: a table of the groups changed, failed or as they should be, then the
    skipped, the unmanaged and the orphan records."""
    if report.lock_holder:
        return []
    lines: list[str] = []
    width = max([len(r.group) for r in report.results] + [len(o.group.name) for o in report.observed] + [10])
    quiet = _quiet(report)
    changes = {
        r.group: f"{_size(r.action.before, r.action.kind)} -> {_size(r.action.after, r.action.kind)}"
        for r in report.results
        if r.action is not None
    }
    sizes = {o.group.name: _size(o.config, o.kind) for o in quiet if o.config is not None}
    column = max([len(c) for c in (*changes.values(), *sizes.values())] + [34])
    for r in report.results:
        a = r.action
        if a is None:
            lines.append(f"  {r.group:<{width}}  {r.status:<8} {r.message}")
            continue
        change = changes[r.group]
        lines.append(f"  {r.group:<{width}}  {a.kind:<4} {a.direction:<5} {r.status:<8} {change:<{column}} {a.reason}")
        if r.status == "failed":
            lines.append(f"  {'':<{width}}  error: {r.message}")
        for pod in a.evict:
            lines.append(f"  {'':<{width}}  drains {pod} on {pod.node}")
        for pod in a.doomed:
            lines.append(f"  {'':<{width}}  force: {pod} on {pod.node} goes down with its node")
    for o in quiet:
        size = sizes[o.group.name]
        lines.append(f"  {o.group.name:<{width}}  {o.kind:<4} {'ok':<14} {size:<{column}} as the schedule wants")
    if report.results or quiet:
        lines.append(
            "  (sizes are min/desired/max, or a node count where a GKE or AKS autoscaler is off; ? = not reported)"
        )
    failed = [s for s in report.skips if s.failed]
    if failed:
        lines.append("  failed:")
        lines += [f"    {s.group}: {s.reason}" for s in failed]
    if len(failed) < len(report.skips):
        lines.append("  skipped:")
        lines += [f"    {s.group}: {s.reason}" for s in report.skips if not s.failed]
    if report.warnings:
        lines.append("  warned before shutdown (a Warning Event on each pod):")
        for w, status in report.warnings:
            when = w.at.strftime("%a %H:%M %Z")
            note = f" ({NOT_WARNED})" if status == "skipped" else ""
            lines.append(f"    {w.pod} on {w.pod.node}  {status:<8} {w.group} goes down at {when}{note}")
    wakes = [(r, w) for r in report.results if r.action is not None and r.action.wake for w in r.action.wakers]
    if wakes or report.notices:
        lines.append("  woken on demand (an Event on each Pending pod):")
        for r, (waker, _, message) in wakes:
            lines.append(f"    {waker}  {r.status:<8} {message}")
        for n, status in report.notices:
            lines.append(f"    {n.pod}  {status:<8} {n.message}")
    if report.unmanaged:
        lines.append("  GPU node groups in the clouds with no schedule in the policy:")
        lines += [f"    {u.cloud} {'/'.join(u.locator.values())} ({u.instance_type})" for u in report.unmanaged]
    lines += _orphans_text(report.orphans)
    return lines


def _quiet(report: NodeGroupsReport) -> list[ObservedGroup]:
    """The groups already where the schedule wants them (neither changed nor skipped)."""
    mentioned = {r.group for r in report.results} | {s.group for s in report.skips}
    return [o for o in report.observed if o.group.name not in mentioned and o.config is not None]


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
            f" restores {_size(record.config, _kind_of(o.identity))} (ConfigMap {o.name})"
        )
        if not o.failed:
            lines.append(f"      {o.reason}; drop it with: {o.delete}")
            continue
        lines.append(f"      {o.reason}")
        lines.append("      restore it (or put it back in the policy: the next run restores it from this record):")
        lines += [f"        {command}" for command in o.restore]
        lines.append(f"      then drop the record: {o.delete}")
    return lines


def _orphan(o: OrphanRecord) -> ItemResult:
    record = o.record
    detail = {
        "namespace": o.namespace,
        "describes": o.identity.to_json() if o.identity else None,
        "phase": record.phase if record else None,
        "recordedAt": record.recorded_at.isoformat() if record else None,
        "restores": record.config.to_json() if record else None,
        "restore": list(o.restore),
        "deleteRecord": o.delete,
    }
    return ItemResult("record", o.name, "failed" if o.failed else "skipped", o.reason, detail=detail)


def _result(r: GroupResult, where: str | None) -> ItemResult:
    detail: dict[str, Any] = {"cluster": where, "message": r.message}
    a = r.action
    if a is None:  # a skip whose write (its record, its Event) failed
        return ItemResult("node group", r.group, r.status, r.message, write=True, detail=detail)
    detail |= {
        "provider": a.kind,
        "direction": a.direction,
        "before": a.before.to_json(),
        "after": a.after.to_json(),
        "steps": [s.describe() for s in a.steps],
        "evict": [str(p) for p in a.evict],
        "force": [str(p) for p in a.doomed],
    }
    # The schedule's reason for the change; a failure's or a refusal's own words when it was not made.
    reason = r.message if r.status == "failed" else a.reason
    return ItemResult("node group", r.group, r.status, reason, write=True, detail=detail | {"why": a.reason})


def items(report: NodeGroupsReport) -> list[ItemResult]:
    """One item per node group of the cluster (changed, failed, skipped, or as it should be), per unmanaged GPU node
    group, and per orphan record."""
    where = report.cluster
    found = [_result(r, where) for r in report.results]
    named = {r.group for r in report.results}
    found += [
        ItemResult(
            "node group",
            s.group,
            "failed" if s.failed else "skipped",
            s.reason,
            detail={"cluster": where, "warning": s.warning},
        )
        for s in report.skips
        if s.group not in named
    ]
    found += [
        ItemResult(
            "node group",
            o.group.name,
            "unchanged",
            "as the schedule wants",
            detail={"cluster": where, "provider": o.kind, "size": o.config.to_json(), "nodes": _nodes(o)},
        )
        for o in _quiet(report)
        if o.config is not None
    ]
    found += [
        ItemResult(
            "node group",
            "/".join(u.locator.values()),
            "skipped",
            "a GPU node group in the cloud with no schedule in the policy",
            detail={
                "cluster": where,
                "unmanaged": True,
                "cloud": u.cloud,
                "locator": dict(u.locator),
                "instanceType": u.instance_type,
            },
        )
        for u in report.unmanaged
    ]
    found += [_warning(w, status, where) for w, status in report.warnings]
    found += [_wake(r, w, where) for r in report.results if r.action is not None for w in r.action.wakers]
    found += [_notice(n, status, where) for n, status in report.notices]
    return found + [_orphan(o) for o in report.orphans]


def _warning(w: PodWarning, status: Status, where: str | None) -> ItemResult:
    """A shutdown warning: a write (an Event), never a change of the group (no limit; one not written is skipped)."""
    detail = {
        "cluster": where,
        "nodeGroup": w.group,
        "namespace": w.pod.namespace,
        "pod": w.pod.name,
        "node": w.pod.node,
        "shutdownAt": w.at.isoformat(),
        "event": w.event,
    }
    reason = NOT_WARNED if status == "skipped" else w.message
    return ItemResult("warning", str(w.pod), status, reason, write=True, detail=detail)


def _wake(r: GroupResult, waker: tuple[PendingPod, str, str], where: str | None) -> ItemResult:
    """A Pending pod that woke its group: the group's change is its own item; this one is for the pod's owner."""
    pod, event, message = waker
    wake = r.action.wake if r.action is not None else None
    detail = {
        "cluster": where,
        "nodeGroup": r.group,
        "namespace": pod.namespace,
        "pod": pod.name,
        "woke": True,
        "nodes": wake.nodes if wake else None,
        "until": wake.until.isoformat() if wake else None,
        "why": wake.reason if wake else None,
        "event": event,
    }
    return ItemResult("wake", str(pod), r.status, message if r.status != "failed" else r.message, detail=detail)


def _notice(n: PodNotice, status: Status, where: str | None) -> ItemResult:
    """A Pending pod that woke nothing, and why (an Event on it, once)."""
    detail = {
        "cluster": where,
        "nodeGroup": n.group or None,
        "namespace": n.pod.namespace,
        "pod": n.pod.name,
        "woke": False,
        "event": n.event,
    }
    reason = NOT_WARNED if status == "skipped" else n.message
    return ItemResult("wake", str(n.pod), status, reason, write=True, detail=detail)


def _nodes(o: ObservedGroup) -> int | None:
    """The group's nodes the cluster's API shows (None: they could not be read): the history's "nodes gone"."""
    return None if o.nodes_error else len(o.nodes)
