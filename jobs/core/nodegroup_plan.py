"""``plan_nodegroups``: from the policy, what was observed and ``now``, the changes that converge every group.

Pure. Level-triggered: it computes what should be true now, so a missed run converges on the next one, and
no-ops are dropped here, so a second run right after the first plans nothing.

The decision for a group (up, down, postpone, drain, skip) is made here only, in one direction: it reads the
group's resolved view (``jobs.core.resolved.view_of``), asks its compiled schedule once for the desired state
(``jobs.core.schedule``), asks the provider's rules once where the group can go and by which steps
(``jobs.core.nodegroups.moves``), and decides. Nothing below calls back.

Records: before the first change of a shutdown, the group's configuration is recorded (phase ``stopping``); when
the last step is done the phase becomes ``down``; after a restore, ``up``. A record in phase ``stopping`` or
``down`` is never overwritten by a later observation, so a crash at any point loses nothing. A record in phase
``up`` is replaced at the next shutdown: manual changes made during working hours are the new normal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from jobs.core.group_config import GroupConfig
from jobs.core.group_record import Record
from jobs.core.nodegroups import PREWARM_POD_PREFIX, Moves, RemoveClaims, SetLimits, SetPlaceholders, Step, moves
from jobs.core.policy import NodeGroup, Policy
from jobs.core.providers import ProviderKind
from jobs.core.resolved import DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_DELAY, GroupSettings, ResolvedGroup, view_of
from jobs.core.timespec import format_duration
from jobs.errors import Busy
from jobs.labels import KEEP_ALIVE_ANNOTATION

__all__ = ["DEFAULT_DRAIN_TIMEOUT", "DEFAULT_MAX_DELAY"]
#: The Event reason of a restore the provider accepted but could not deliver (stockout, quota).
RESTORE_NOT_DELIVERED = "RestoreNotDelivered"
#: How the schedule says a group is up before its window opens (``jobs.core.schedule``: "warming up for ...").
WARMING_UP = "warming up"
#: The Event reason of a warning on a running GPU pod that its group goes down soon (``warnBefore``).
SHUTDOWN_WARNING = "ShutdownWarning"


@dataclass(frozen=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    unschedulable: bool = False
    cordoned_by_job: bool = False  # cordoned by a drain of this job (marked), so the job uncordons it


@dataclass(frozen=True)
class GpuPod:
    """A pod that requests GPUs, on a node. ``evictable`` is False for safe-to-evict "false" or keep-alive."""

    namespace: str
    name: str
    node: str
    gpus: int
    evictable: bool
    uid: str = ""  # tells a pod from its replacement of the same name (a StatefulSet's)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}/{self.uid}"


class BudgetRefused(Busy):
    """An eviction a PodDisruptionBudget refused; ``budget`` is ``namespace/name`` when the API named it."""

    def __init__(self, message: str, *, budget: str | None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.budget = budget


@dataclass(frozen=True)
class ObservedGroup:
    group: NodeGroup
    kind: ProviderKind  # as the shell found it; the planner reads the provider from the resolved policy
    config: GroupConfig | None  # None: could not be read (see error)
    record: Record | None = None
    pods: tuple[GpuPod, ...] = ()  # GPU pods on the group's nodes
    nodes: tuple[str, ...] = ()
    error: str | None = None  # the cloud could not be read
    cluster: str = ""  # the cluster whose API the pods and nodes were read from
    nodes_error: str | None = None  # the group's nodes could not be identified or read in that cluster
    record_error: str | None = None  # its record exists but cannot be used
    cordoned: tuple[str, ...] = ()  # its nodes a drain of this job left cordoned (marked as the job's)
    # The budgets that blocked the group's last drain, as they are now: namespace/name -> disruptionsAllowed
    # (None: the budget is gone). Read only when the record says a drain gave up.
    budgets: tuple[tuple[str, int | None], ...] = ()
    # The shutdown warnings its pods already carry: ``namespace/name`` of each Event (see ``warning_event``).
    warned: frozenset[str] = frozenset()


@dataclass(frozen=True)
class PodWarning:
    """A Warning Event to put on a running GPU pod: its group goes down at ``at``. ``event`` is the Event's name,
    one per pod (uid) and shutdown instant, so a later run finds it and never adds another."""

    group: str
    pod: GpuPod
    at: datetime  # in the group's timezone
    message: str
    event: str


def warning_event(pod: GpuPod, at: datetime) -> str:
    """The name of the one warning Event of ``pod`` (followed by uid: a replacement is warned on its own) for the
    shutdown at ``at``. Event names are DNS subdomains of at most 253 characters."""
    digest = hashlib.sha256(f"{pod.uid}/{at.astimezone(UTC).isoformat()}".encode()).hexdigest()[:16]
    suffix = f".shutdown-{digest}"
    return pod.name[: 253 - len(suffix)] + suffix


@dataclass(frozen=True)
class GroupAction:
    """Converge one group. ``take_record`` asks the shell to record a live configuration before any change."""

    group: str
    kind: ProviderKind
    direction: Literal["down", "up"]
    reason: str
    before: GroupConfig
    after: GroupConfig
    steps: tuple[Step, ...]
    take_record: bool
    record: Record | None  # the record the shutdown or restore works from (None until taken)
    evict: tuple[GpuPod, ...] = ()
    cordon: tuple[str, ...] = ()
    doomed: tuple[GpuPod, ...] = ()  # onBusy force: pods that go down with their nodes
    drain_timeout: timedelta = DEFAULT_DRAIN_TIMEOUT
    uncordon: tuple[str, ...] = ()  # nodes the job cordoned and no drain needs any more: undo after the steps
    only_uncordon: bool = False  # nothing else to do: no step, no record
    prior: Record | None = None  # the record as observed, also when a new one is taken (a drain that gives up)
    # A pool whose nodes running work stay for now (Karpenter, onBusy wait): when the wait began, kept in its record.
    busy_since: datetime | None = None


@dataclass(frozen=True)
class GroupSkip:
    group: str
    reason: str
    warning: bool = False
    save_record: Record | None = None  # e.g. the instant a shutdown was first postponed
    failed: bool = False  # not a choice but a failure: counts as a failed item (exit 1)
    event: str | None = None  # the reason of a Warning Event the skip is worth on the group's record


@dataclass(frozen=True)
class NodeGroupPlan:
    actions: tuple[GroupAction, ...]
    skips: tuple[GroupSkip, ...]
    warnings: tuple[PodWarning, ...] = ()  # Events to announce a shutdown: not changes (no limit, no exit code)

    @property
    def writes(self) -> bool:
        return bool(self.actions or self.warnings) or any(s.save_record or s.event for s in self.skips)

    @property
    def failures(self) -> tuple[GroupSkip, ...]:
        return tuple(s for s in self.skips if s.failed)


#: Why a group on which someone else's update runs is left alone this run.
BUSY = "an update is already running on the group: next run"


def plan_nodegroups(policy: Policy, observed: tuple[ObservedGroup, ...], now: datetime) -> NodeGroupPlan:
    resolved = view_of(policy).by_name
    actions: list[GroupAction] = []
    skips: list[GroupSkip] = []
    warnings: list[PodWarning] = []
    for og in observed:
        rg = resolved[og.group.name]
        warnings += _warnings(rg, og, now)
        outcome = _decide(rg, og, now)
        if og.config is not None and og.config.busy and _leaves_busy(outcome):
            # Someone else's update is running (a console change, an upgrade): converge on the next run rather
            # than queue behind it, and say so rather than report the group as where it should be.
            outcome = GroupSkip(og.group.name, BUSY)
        draining = isinstance(outcome, GroupAction) and bool(outcome.evict)
        if og.cordoned and not draining and og.config is not None:
            # A cordon is the job's only while it drains: whatever else happens to the group, undo it.
            if isinstance(outcome, GroupAction):
                outcome = replace(outcome, uncordon=og.cordoned)
            else:
                actions.append(_uncordon_only(rg, og, og.config))
        if isinstance(outcome, GroupAction):
            actions.append(outcome)
        elif isinstance(outcome, GroupSkip):
            skips.append(outcome)
    return NodeGroupPlan(tuple(actions), tuple(skips), tuple(warnings))


def _warnings(rg: ResolvedGroup, og: ObservedGroup, now: datetime) -> list[PodWarning]:
    """A warning for each running GPU pod of a group that goes down within its ``warnBefore``, that does not carry
    it yet. The schedule engine says when the group next goes down (DST and holidays included); a group it keeps
    up (alwaysOn, a system pool) or that cannot be read warns nobody."""
    settings = rg.settings
    if not settings.warn_before or not og.pods or og.config is None or og.config.system or og.nodes_error:
        return []
    desired = rg.schedule.desired(now)
    at = desired.next_change
    if desired.state != "up" or at is None or at - now > settings.warn_before:
        return []
    due = ((p, warning_event(p, at)) for p in og.pods)
    return [
        PodWarning(rg.name, p, at, _warning_text(rg.name, at, settings, og.pods, p), name)
        for p, name in due
        if f"{p.namespace}/{name}" not in og.warned
    ]


def _warning_text(group: str, at: datetime, settings: GroupSettings, pods: tuple[GpuPod, ...], pod: GpuPod) -> str:
    """What a person reads under ``kubectl describe pod``: which group, when, what happens to running work, and how
    to keep it."""
    when = at.strftime("%a %Y-%m-%d %H:%M %Z")
    kept = [p for p in pods if not p.evictable]
    keep = (
        f"to keep it up while this pod runs: kubectl -n {pod.namespace} annotate pod {pod.name}"
        f" {KEEP_ALIVE_ANNOTATION}=true (the group then stays up until every such pod ends), or an override in the"
        " policy (state: up, until)"
    )
    if kept:
        fate = f"it stays up while pods that must not be evicted run ({', '.join(map(str, kept))})"
    elif settings.on_busy == "wait":
        then = {"drain": "they are evicted", "force": "they go down with their nodes", "stay": "it stays up"}
        fate = (
            f"onBusy wait: GPU pods still running then keep it up for at most {format_duration(settings.max_delay)},"
            f" then {then[settings.after_delay]}"
        )
    elif settings.on_busy == "drain":
        fate = "onBusy drain: GPU pods still running then are evicted"
    else:
        fate = "onBusy force: GPU pods still running then go down with their nodes"
    return f"Node group {group} goes down at {when}: {fate}; {keep}"


def _leaves_busy(outcome: GroupAction | GroupSkip | None) -> bool:
    """Whether a busy group's outcome gives way to the busy skip: a change would queue behind the running update,
    and "nothing to do" would hide it; a skip with its own reason (failed, postponed) stands."""
    return outcome is None or (isinstance(outcome, GroupAction) and bool(outcome.steps))


def _decide(rg: ResolvedGroup, og: ObservedGroup, now: datetime) -> GroupAction | GroupSkip | None:
    name = rg.name
    if og.record_error is not None:
        reason = f"left as it is: {og.record_error} (fix or delete it: the sizes to restore are unknown)"
        return GroupSkip(name, reason, warning=True, failed=True)
    if og.config is None:
        return GroupSkip(name, f"cannot read the group: {og.error}", warning=True, failed=True)
    if og.config.system:
        return GroupSkip(name, rg.rules.never_down or "never scaled", warning=True)
    desired = rg.schedule.desired(now)
    group = rg.group
    m = moves(
        rg.rules,
        og.config,
        og.record,
        up=group.up,
        stop=group.strategy == "stop",
        wake_up=group.autoscaler_wake_up,
        cloud_cluster=rg.cloud_cluster,
        prewarm=_prewarm(rg, desired.state, desired.reason),
    )
    if m.record_problem is not None:
        reason = f"left as it is: its record is not usable: {m.record_problem} (fix or delete it)"
        return GroupSkip(name, reason, warning=True, failed=True)
    if desired.state == "down":
        return _down(rg, og, m, desired.reason, now)
    return _up(rg, og, m, desired.reason)


def _down(rg: ResolvedGroup, og: ObservedGroup, m: Moves, reason: str, now: datetime) -> GroupAction | GroupSkip | None:
    record, current, settings = og.record, m.current, rg.settings
    if not m.down_steps:
        if record is not None and record.phase == "stopping":
            # A previous run made every change but crashed before marking the record: finish the bookkeeping.
            return GroupAction(rg.name, rg.kind, "down", reason, current, m.down, (), False, record)
        return None
    unseen = _unseen(og, current)
    if unseen is not None:
        return GroupSkip(rg.name, f"not shut down: {unseen}", warning=True, failed=True)
    if rg.rules.by_limits:
        return _down_by_claims(rg, og, m, reason, now)
    keep_alive = [p for p in og.pods if not p.evictable]
    if keep_alive:
        names = ", ".join(map(str, keep_alive))
        return GroupSkip(rg.name, f"stays up: pods that must not be evicted are running ({names})", warning=True)
    evict: tuple[GpuPod, ...] = ()
    doomed: tuple[GpuPod, ...] = ()
    if og.pods:
        names = ", ".join(map(str, og.pods))
        mode: str = settings.on_busy
        if mode == "wait":
            since = record.busy_since if record is not None else None
            if since is None or now - since < settings.max_delay:
                save = None
                if since is None:
                    save = Record(current, "up", now, now) if record is None else replace(record, busy_since=now)
                until = ((since or now) + settings.max_delay).isoformat()
                return GroupSkip(
                    rg.name, f"shutdown postponed until {until}: GPU pods running ({names})", save_record=save
                )
            mode = settings.after_delay
            if mode == "stay":
                return GroupSkip(rg.name, f"stays up after maxDelay: GPU pods running ({names})", warning=True)
        if mode == "drain":
            evict = og.pods
            blocked = _drain_blocked(og, now)
            if blocked is not None:
                return GroupSkip(rg.name, blocked, warning=True, failed=True)
        else:
            doomed = og.pods
    take_record = record is None or record.phase == "up"
    return GroupAction(
        rg.name,
        rg.kind,
        "down",
        reason,
        current,
        m.down,
        m.down_steps,
        take_record,
        None if take_record else record,
        evict=evict,
        cordon=og.nodes if evict else (),
        doomed=doomed,
        drain_timeout=settings.drain_timeout,
        prior=record,
    )


def _down_by_claims(
    rg: ResolvedGroup, og: ObservedGroup, m: Moves, reason: str, now: datetime
) -> GroupAction | GroupSkip:
    """A pool without a size (Karpenter): the zero limit always, then its nodes one by one, Karpenter draining each
    (evictions, budgets respected). Running work holds only its own node: GPU pods and ``do-not-disrupt`` pods.
    ``onBusy`` wait keeps those nodes (and postpones), drain lets Karpenter drain them unless that would force pods
    off (a claim's ``terminationGracePeriod``) or stall (a do-not-disrupt pod), force lets them all go. Pods that
    must not be evicted keep their node whatever onBusy says; idle nodes go now."""
    record, current, settings, name = og.record, m.current, rg.settings, rg.name
    if current.refused is not None:
        return GroupSkip(name, f"not shut down: {current.refused}", warning=True, failed=True)
    mine = set(og.nodes)
    pods = [p for p in og.pods if not p.name.startswith(PREWARM_POD_PREFIX)]  # this job's placeholders: no work
    protected = {p.node for p in pods if not p.evictable} & mine
    busy = [p for p in pods if p.evictable and p.node not in protected]
    working = ({p.node for p in busy} | set(current.do_not_disrupt_nodes)) & mine - protected
    mode: str = settings.on_busy
    notes = [f"pods that must not be evicted run on {', '.join(sorted(protected))}"] if protected else []
    save: Record | None = None
    since = record.busy_since if record is not None else None
    if working and mode == "wait":
        if since is None or now - since < settings.max_delay:
            notes.append(f"nodes running work kept until {((since or now) + settings.max_delay).isoformat()}")
            if since is None and record is not None and record.phase != "up":
                save = replace(record, busy_since=now)
            since = since or now
        else:
            mode = settings.after_delay
            if mode == "stay":
                notes.append("nodes running work stay after maxDelay")
    how: Literal["keep", "drain", "force"] = "drain" if mode == "drain" else "force" if mode == "force" else "keep"
    if how == "keep":
        held = working
    elif how == "drain":
        # Karpenter would force GPU pods off at the claim's deadline, or never finish a do-not-disrupt drain.
        held = ({p.node for p in busy} & set(current.grace_nodes) | set(current.do_not_disrupt_nodes)) & mine
    else:
        held = set()
    kept = tuple(sorted(protected | held))
    if held and how != "keep":
        notes.append(f"kept as onBusy force would: {', '.join(sorted(held))}")
    names = ", ".join(f"{p} on {p.node}" for p in pods if p.node in kept)
    why = "; ".join(notes) + (f" ({names})" if names else "")
    deletable = (current.desired or 0) - len(kept)
    if not any(isinstance(s, SetLimits) for s in m.down_steps) and deletable <= 0:
        # The limit is down and only nodes with running work remain: nothing to write this run.
        return GroupSkip(name, f"shutdown postponed: {why}", save_record=save, warning=bool(protected))
    steps = tuple(replace(s, busy=how, keep=kept) if isinstance(s, RemoveClaims) else s for s in m.down_steps)
    take_record = record is None or record.phase == "up"
    return GroupAction(
        name,
        rg.kind,
        "down",
        f"{reason}; {why}" if why else reason,
        current,
        m.down,
        steps,
        take_record,
        None if take_record else record,
        doomed=tuple(p for p in busy if p.node not in kept) if how == "force" else (),
        drain_timeout=settings.drain_timeout,
        prior=record,
        busy_since=since if working else None,
    )


def _drain_blocked(og: ObservedGroup, now: datetime) -> str | None:
    """Why the group is not drained this run, or None: its last drain gave up, the back-off has not passed, and
    nothing that blocked it changed: some blocking pod is still on the group's nodes (followed by uid) and every
    budget allows what it allowed then. A drain goes through only once every blocker is out of the way, so one
    blocker leaving while another stays is no change, nor is a controller's same-named replacement of a blocker
    on another node or Pending (another pod, and not the group's). New pods landing on its nodes are not a
    change either: draining again would evict them into the same refusal."""
    block = og.record.drain_blocked if og.record is not None else None
    if block is None or now >= block.retry_at:
        return None
    running = {p.key for p in og.pods}
    if (block.pods and running.isdisjoint(block.pods)) or dict(og.budgets) != dict(block.budgets):
        return None
    pods = ", ".join(p.rsplit("/", 1)[0] for p in block.pods) or "none"
    budgets = ", ".join(f"{n} allows {a}" for n, a in block.budgets) or "none named"
    return (
        f"shutdown blocked: the drain at {block.at.isoformat()} gave up ({block.attempts} time(s)) on {pods}"
        f" (disruption budgets: {budgets}); next drain at {block.retry_at.isoformat()}, or as soon as those pods or"
        " budgets change"
    )


def _unseen(og: ObservedGroup, current: GroupConfig) -> str | None:
    """Why the group's running work cannot be judged, or None. Unknown is never idle: a group is judged idle only
    through its own cluster's API, and only when that API shows the nodes the cloud says the group has."""
    where = f"cluster {og.cluster}" if og.cluster else "the cluster"
    if og.nodes_error is not None:
        return f"{og.nodes_error} (unknown is never idle)"
    if og.nodes or current.stopped:
        return None
    if current.desired is None:
        return (
            f"the cloud does not say how many nodes the group has and {where}'s API shows none (unknown is never idle)"
        )
    if current.desired > 0 and current.missing >= current.desired * current.zones:
        return None  # the cloud itself says none of them launched (a restore that never delivered): none to judge
    if current.desired > 0:
        return (
            f"the cloud reports {current.desired * current.zones} node(s) but {where}'s API shows none of them"
            " (wrong cluster, or nodes not registered yet)"
        )
    return None


def _prewarm(rg: ResolvedGroup, state: str, reason: str) -> int:
    """The placeholder pods a Karpenter pool with ``prewarm`` should have now: its count while warming up for a
    window (from ``warmUp`` before it opens), none once it is open or at night."""
    prewarm = rg.group.prewarm
    if prewarm is None or not rg.rules.by_limits:
        return 0
    return prewarm.nodes if state == "up" and reason.startswith(WARMING_UP) else 0


def _up(rg: ResolvedGroup, og: ObservedGroup, m: Moves, reason: str) -> GroupAction | GroupSkip | None:
    record, current = og.record, m.current
    if m.up is not None and current.placeholders != m.up.placeholders and (record is None or record.phase == "up"):
        # A pool that is up (nothing to restore): only its prewarm placeholders change, placed or removed.
        after = replace(current, placeholders=m.up.placeholders)
        return GroupAction(
            rg.name, rg.kind, "up", reason, current, after, (SetPlaceholders(after.placeholders),), False, record
        )
    if record is not None and record.phase == "up" and (record.busy_since or record.drain_blocked) is not None:
        # A postponed or blocked shutdown never happened and working hours are back: forget when the wait began
        # and why the drain gave up, or the next evening would start with the wait used up and the drain backed off.
        return GroupSkip(
            rg.name,
            "working hours are back: the wait for running GPU pods is over",
            save_record=replace(record, busy_since=None, drain_blocked=None),
        )
    if record is None and not m.looks_down:
        return None  # up, and nothing of ours to undo
    if record is not None and record.phase == "up":
        if current.shortfall is not None:
            # Restored earlier, and the provider has since said it could not bring every node: say so each run.
            return GroupSkip(rg.name, f"up, but nodes are missing: {current.shortfall}", warning=True)
        return None  # phase up: what people changed during the day stands
    if m.up is None:
        # Working hours, and the group stays down all day: not guessing a size is right, exit 0 is not.
        hint = (
            "no record of its NodePool limits: not guessing (write its limits back by hand; the job then sees it up)"
            if rg.rules.by_limits
            else "no record and no `up` size in the policy: not guessing (give it `up:` to restore it)"
        )
        return GroupSkip(
            rg.name,
            f"down with {hint}",
            warning=True,
            failed=True,
        )
    short = current.shortfall or (f"{current.missing} node(s) asked for are not there" if current.missing else None)
    if short is not None and not m.brings_nodes and not rg.rules.by_limits:  # a pool's nodes come with pods
        # The size is back but the provider could not bring the nodes: resending it would change nothing, and
        # the rest of the restore waits for them. The record stays, so a later run finishes once they arrive.
        return GroupSkip(
            rg.name,
            f"restore not delivered: {short} (size already requested; the next run looks again)",
            warning=True,
            failed=True,
            event=RESTORE_NOT_DELIVERED,
        )
    return GroupAction(rg.name, rg.kind, "up", reason, current, m.up, m.up_steps, False, record)


def _uncordon_only(rg: ResolvedGroup, og: ObservedGroup, current: GroupConfig) -> GroupAction:
    reason = "nodes a drain of this job cordoned, and no drain needs them cordoned now"
    return GroupAction(
        rg.name,
        rg.kind,
        "up",
        reason,
        current,
        current,
        (),
        False,
        og.record,
        uncordon=og.cordoned,
        only_uncordon=True,
    )
