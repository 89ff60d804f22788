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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from jobs.core.group_config import GroupConfig
from jobs.core.group_record import Record
from jobs.core.nodegroups import (
    PREWARM_POD_PREFIX,
    Moves,
    RemoveClaims,
    SetLimits,
    SetPlaceholders,
    Step,
    moves,
    steps_between,
)
from jobs.core.policy import NodeGroup, Policy
from jobs.core.providers import ProviderKind
from jobs.core.resolved import DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_DELAY, GroupSettings, ResolvedGroup, view_of
from jobs.core.timespec import ECHO_LIMIT, format_duration, quoted
from jobs.core.wake import (
    KEEP_UP_UNTIL_ANNOTATION,
    KEPT_UP,
    NOT_WOKEN,
    READY_MINUTES,
    KeepUp,
    NodeShape,
    PendingPod,
    WakeRecord,
    ends,
    fits,
    nodes_needed,
    notice_event,
    rfc3339,
    wake_config,
    wake_limits,
    waking_text,
)
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
    shape: NodeShape = field(
        default_factory=NodeShape
    )  # its labels, taints and GPU resources, recorded when its group goes down


@dataclass(frozen=True)
class GpuPod:
    """A pod that requests GPUs, on a node. ``evictable`` is False for safe-to-evict "false" or keep-alive."""

    namespace: str
    name: str
    node: str
    gpus: int
    evictable: bool
    uid: str = ""  # tells a pod from its replacement of the same name (a StatefulSet's)
    owner: str = ""  # its controller's uid: a replacement it creates for this pod must not wake the group
    keep_up_until: str | None = None  # its gpu-jobs/keep-up-until, as written

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
    shape: NodeShape | None = None  # what its nodes look like now (None: no node in sight)


@dataclass(frozen=True)
class PodNotice:
    """An Event telling a Pending GPU pod why it woke no group, or a running one that it keeps its group up (once per
    pod: ``event`` is named by its uid)."""

    group: str  # the group it would have woken ("" when it fits none), or that it keeps up
    pod: PendingPod | GpuPod
    message: str
    event: str
    reason: str = NOT_WOKEN


@dataclass(frozen=True)
class PodWarning:
    """A Warning Event to put on a running GPU pod: its group goes down at ``at``. ``event`` is the Event's name,
    one per pod (uid) and shutdown instant, so a later run finds it and never adds another."""

    group: str
    pod: GpuPod
    at: datetime  # in the group's timezone
    message: str
    event: str


def keep_up_event(pod: GpuPod, entry: KeepUp) -> str:
    """The one Event telling ``pod`` its keep-up-until holds the group (per uid and value asked)."""
    digest = hashlib.sha256(f"{pod.uid}/{entry.asked}".encode()).hexdigest()[:16]
    suffix = f".keepup-{digest}"
    return pod.name[: 253 - len(suffix)] + suffix


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
    wake: WakeRecord | None = None  # a wake: ``record`` (which holds it) is saved before the steps, and stays
    wakers: tuple[tuple[PendingPod, str, str], ...] = ()  # each pod that woke it, its Event's name and message
    shape: NodeShape | None = None  # what its nodes look like, for the record a shutdown takes
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
    kept: tuple[PodNotice, ...] = ()  # pods whose keep-up-until holds the group up, told once (with save_record)


@dataclass(frozen=True)
class NodeGroupPlan:
    actions: tuple[GroupAction, ...]
    skips: tuple[GroupSkip, ...]
    warnings: tuple[PodWarning, ...] = ()  # Events to announce a shutdown: not changes (no limit, no exit code)
    notices: tuple[PodNotice, ...] = ()  # Events telling a Pending GPU pod why it woke nothing

    @property
    def writes(self) -> bool:
        return bool(self.actions or self.warnings or self.notices) or any(s.save_record or s.event for s in self.skips)

    @property
    def failures(self) -> tuple[GroupSkip, ...]:
        return tuple(s for s in self.skips if s.failed)


#: Why a group on which someone else's update runs is left alone this run.
BUSY = "an update is already running on the group: next run"


def plan_nodegroups(
    policy: Policy,
    observed: tuple[ObservedGroup, ...],
    now: datetime,
    pending: tuple[PendingPod, ...] = (),
    told: frozenset[str] = frozenset(),
    every_group: bool = True,
) -> NodeGroupPlan:
    """``pending``: the cluster's Pending GPU pods; ``told``: ``namespace/name`` of the wake Events they carry;
    ``every_group``: ``observed`` holds every group of the cluster (not ``--only`` one), so a pod that fits none of
    them fits no group of the policy and may be told so."""
    resolved = view_of(policy).by_name
    actions: list[GroupAction] = []
    skips: list[GroupSkip] = []
    warnings: list[PodWarning] = []
    claims, notices = _claims(resolved, observed, pending, told, now, every_group)
    for og in observed:
        rg = resolved[og.group.name]
        warnings += _warnings(rg, og, now)
        outcome = _decide(rg, og, now, claims.get(og.group.name, ()))
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
    return NodeGroupPlan(tuple(actions), tuple(skips), tuple(warnings), tuple(notices))


def _claims(
    resolved: Mapping[str, ResolvedGroup],
    observed: tuple[ObservedGroup, ...],
    pending: tuple[PendingPod, ...],
    told: frozenset[str],
    now: datetime,
    every_group: bool = True,
) -> tuple[dict[str, tuple[PendingPod, ...]], list[PodNotice]]:
    """Which down group each Pending GPU pod wakes (the first in the policy's order it fits and may wake), and a
    notice for each pod that fits down groups but wakes none, or fits no group at all, while some group wakes."""
    if not pending or not any(resolved[og.group.name].group.wake for og in observed):
        return {}, []
    down: list[tuple[ObservedGroup, ResolvedGroup]] = []
    up_fits: list[ObservedGroup] = []
    for og in observed:
        rg = resolved[og.group.name]
        if og.config is None or og.config.system or rg.node_selector is None:
            continue
        if rg.schedule.desired(now).state == "down" and not og.nodes and not _woken(og, now):
            down.append((og, rg))
        else:
            up_fits.append(og)
    claims: dict[str, list[PendingPod]] = {}
    notices: list[PodNotice] = []
    for pod in pending:
        shape = {og.group.name: og.record.shape if og.record else None for og, _ in down}
        fitting = [(og, rg) for og, rg in down if rg.node_selector and fits(pod, rg.node_selector, shape[rg.name])]
        ups = [og for og in up_fits if fits(pod, resolved[og.group.name].node_selector or {}, og.shape)]
        if ups:
            continue  # a group it fits is up (or woken): the scheduler or the autoscaler places it
        why, group = _why_not(pod, fitting, now)
        if why is None:
            claims.setdefault(group, []).append(pod)
            continue
        name = notice_event(pod, "nowake")
        if not fitting and not every_group:
            continue  # it may fit a group this run does not look at
        if why and f"{pod.namespace}/{name}" not in told:
            notices.append(PodNotice(group, pod, why, name))
    return {g: tuple(p) for g, p in claims.items()}, notices


def _woken(og: ObservedGroup, now: datetime) -> bool:
    wake = og.record.wake if og.record is not None else None
    return wake is not None and now < wake.until


def _why_not(
    pod: PendingPod, fitting: list[tuple[ObservedGroup, ResolvedGroup]], now: datetime
) -> tuple[str | None, str]:
    """(None, group) when ``pod`` wakes ``group``; else why not ("" when it says nothing: it woke it once already)."""
    if not fitting:
        why = "not waking any node group: no node group of the policy that is down fits this pod (its GPU resource,"
        return why + " node selector, affinity or tolerations)", ""
    reasons: list[str] = []
    for og, rg in fitting:
        wake, record = rg.group.wake, og.record
        if wake is None or not wake.on_pending_pods:
            at = rg.schedule.desired(now).next_change
            back = f" it comes up at {at:%a %H:%M %Z}" if at is not None else ""
            reasons.append(f"not waking {rg.name}: it has no wake policy;{back}")
        elif not wake.allows(pod.namespace):
            allowed = ", ".join(wake.namespaces)
            reasons.append(
                f"not waking {rg.name}: namespace {pod.namespace} may not wake it (wake.namespaces: {allowed})"
            )
        elif record is not None and pod.owner and pod.owner in record.displaced:
            reasons.append(
                f"not waking {rg.name}: this pod replaces one this job evicted (or whose node it removed) tonight,"
                " and a replacement never wakes the group it was drained from"
            )
        elif record is not None and pod.uid in record.woke:
            return "", rg.name  # it woke the group once tonight; it does not keep waking it
        else:
            return None, rg.name
    return "; ".join(reasons), fitting[0][1].name


def _warnings(rg: ResolvedGroup, og: ObservedGroup, now: datetime) -> list[PodWarning]:
    """A warning for each running GPU pod of a group that goes down within its ``warnBefore``, that does not carry
    it yet. The schedule engine says when the group next goes down (DST and holidays included); a group it keeps
    up (alwaysOn, a system pool) or that cannot be read warns nobody."""
    settings = rg.settings
    if not settings.warn_before or not og.pods or og.config is None or og.config.system or og.nodes_error:
        return []
    desired = rg.schedule.desired(now)
    at = desired.next_change
    postponed = _postponement_end(rg, og) if desired.state == "down" else None
    if desired.state == "down" and og.record is not None and og.record.wake is not None and _woken(og, now):
        at = og.record.wake.until  # a woken group goes down when its wake ends: warned first, like any shutdown
    elif postponed is not None:
        at = postponed  # the wait for running pods ends then, and they are evicted: announced like a shutdown
    elif desired.state != "up":
        return []
    if at is None or at - now > settings.warn_before:
        return []
    due = ((p, warning_event(p, at)) for p in og.pods)
    return [
        PodWarning(rg.name, p, at, _warning_text(rg.name, at, settings, og.pods, p, postponed is not None), name)
        for p, name in due
        if f"{p.namespace}/{name}" not in og.warned and not (postponed and _warned_for_this_shutdown(og, p))
    ]


def _postponement_end(rg: ResolvedGroup, og: ObservedGroup) -> datetime | None:
    """When a shutdown postponed for running GPU pods (``onBusy: wait``) stops waiting and takes them (evicted, or
    down with their nodes); None when nothing waits, or when the group then simply stays up."""
    record, settings = og.record, rg.settings
    if record is None or record.phase != "up" or record.busy_since is None or settings.on_busy != "wait":
        return None
    # In the group's timezone: the Event names the time as the schedule says it.
    return (
        None if settings.after_delay == "stay" else (record.busy_since + settings.max_delay).astimezone(rg.schedule.tz)
    )


def _warned_for_this_shutdown(og: ObservedGroup, pod: GpuPod) -> bool:
    """Whether the pod still carries a warning of this job (the window's end said already what maxDelay does): one
    Event per pod per shutdown. A pod started during the wait has none, and is warned before it is taken."""
    return any(w.startswith(f"{pod.namespace}/{pod.name[:200]}") and ".shutdown-" in w for w in og.warned)


def _warning_text(
    group: str, at: datetime, settings: GroupSettings, pods: tuple[GpuPod, ...], pod: GpuPod, postponed: bool = False
) -> str:
    """What a person reads under ``kubectl describe pod``: which group, when, what happens to running work, and how
    to keep it. ``postponed``: the group is past its window and waits for running pods until ``at``."""
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
    if postponed:
        fate = "they are evicted" if settings.after_delay == "drain" else "they go down with their nodes"
        head = f"Node group {group} is past its working hours and waits for running GPU pods until {when}"
        return f"{head} (maxDelay {format_duration(settings.max_delay)}): then {fate}; {keep}"
    return f"Node group {group} goes down at {when}: {fate}; {keep}"


def _leaves_busy(outcome: GroupAction | GroupSkip | None) -> bool:
    """Whether a busy group's outcome gives way to the busy skip: a change would queue behind the running update,
    and "nothing to do" would hide it; a skip with its own reason (failed, postponed) stands."""
    return outcome is None or (isinstance(outcome, GroupAction) and bool(outcome.steps))


def _decide(
    rg: ResolvedGroup, og: ObservedGroup, now: datetime, wakers: tuple[PendingPod, ...] = ()
) -> GroupAction | GroupSkip | None:
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
        if _woken(og, now):
            return _stay_woken(rg, og, m)
        if wakers and m.looks_down:
            return _wake(rg, og, m, wakers, now)
        return _down(rg, og, m, desired.reason, now)
    return _up(rg, og, m, desired.reason)


def _stay_woken(rg: ResolvedGroup, og: ObservedGroup, m: Moves) -> GroupAction | GroupSkip:
    """A wake in force: the group stays at its woken size (a run that crashed between the record and the resize
    sends the resize again); the normal shutdown path takes over at ``until``."""
    assert og.record is not None
    wake = og.record.wake
    assert wake is not None
    target = wake_config(rg.kind, m.current, wake.nodes)
    steps = tuple(steps_between(rg.kind, m.current, target))
    if steps:
        return GroupAction(
            rg.name, rg.kind, "up", wake.reason, m.current, target, steps, False, og.record, wake=wake, prior=og.record
        )
    return GroupSkip(rg.name, f"woken until {wake.until.isoformat()}: {wake.reason}")


def _wake(
    rg: ResolvedGroup, og: ObservedGroup, m: Moves, pods: tuple[PendingPod, ...], now: datetime
) -> GroupAction | GroupSkip | None:
    """Bring a down group up for its Pending pods: the nodes they need, at most ``wake.maxNodes`` and never above
    its working ``up.max`` (or its recorded max), for ``wake.for``."""
    group, record, current = rg.group, og.record, m.current
    assert group.wake is not None
    if record is None or record.phase != "down":
        why = "no record of its working size" if record is None else f"its shutdown is not finished ({record.phase})"
        return GroupSkip(rg.name, f"not woken for {pods[0]}: {why}; the next run looks again", warning=True)
    if current.stopped:
        return GroupSkip(rg.name, "not woken: a stopped pool starts at its full count (wake is for scaled pools)", True)
    # A Karpenter pool has no size to stay under: maxNodes (and a recorded ``nodes`` limit) bound it.
    sized = not rg.rules.by_limits
    upper = group.up.max if group.up is not None else (record.config.max or record.config.desired or 0) if sized else 0
    cap = min(group.wake.max_nodes, upper) if upper > 0 else group.wake.max_nodes
    zones = max(1, current.zones)
    nodes = min(nodes_needed(pods, group.gpus_per_node), cap)
    nodes = -(-nodes // zones) * zones  # whole nodes per zone where the provider counts per zone
    if nodes > cap:
        return GroupSkip(
            rg.name, f"not woken for {pods[0]}: it needs a node in each of its {zones} zones, above {cap}", True
        )
    until = ends(now, group.wake.duration).astimezone(rg.schedule.tz)  # the Event says it in the group's time
    more = f" and {len(pods) - 1} more" if len(pods) > 1 else ""
    reason = f"wake: {pods[0]}{more} Pending out of hours (wake.onPendingPods, namespace {pods[0].namespace})"
    wake = WakeRecord(str(pods[0]), pods[0].uid, reason, now, until, nodes)
    saved = replace(record, wake=wake, woke=tuple(sorted({*record.woke, *(p.uid for p in pods)})))
    target = wake_config(rg.kind, current, nodes) if sized else wake_limits(record.config, current, nodes)
    steps = tuple(steps_between(rg.kind, current, target))
    ready = READY_MINUTES.get(rg.kind, 5)
    told = tuple((p, notice_event(p, "wake"), waking_text(rg.name, nodes, ready, until)) for p in pods)
    return GroupAction(
        rg.name, rg.kind, "up", reason, current, target, steps, False, saved, wake=wake, wakers=told, prior=record
    )


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
    held, notes = _kept_up(og, current, settings.max_delay, now.astimezone(rg.schedule.tz))
    if isinstance(held, GroupSkip):
        return held
    if rg.rules.by_limits:
        return _down_by_claims(rg, og, m, reason + notes, now)
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
        reason + notes,
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
        shape=og.shape,
    )


def _kept_up(og: ObservedGroup, current: GroupConfig, cap: timedelta, now: datetime) -> tuple[GroupSkip | None, str]:
    """A skip when a running pod's ``gpu-jobs/keep-up-until`` holds the group up now (capped at maxDelay from when
    it was first seen, saved in the record with the pod's Event the first time), and a note on values that are
    ignored (malformed). ``now`` is in the group's timezone."""
    record, notes, holds = og.record, [], []
    seen = {(k.pod, k.asked): k for k in record.kept_up} if record is not None else {}
    for pod in og.pods:
        text = pod.keep_up_until
        if text is None:
            continue
        asked = rfc3339(text)
        if asked is None:
            notes.append(f"{pod}: {KEEP_UP_UNTIL_ANNOTATION}={quoted(text, ECHO_LIMIT)} is not an RFC 3339 time")
            continue
        entry = seen.get((pod.key, text)) or KeepUp(pod.key, text, now)
        until = min(asked, entry.seen + cap).astimezone(now.tzinfo)  # in the group's timezone
        if now < until:
            holds.append((pod, entry, until, until < asked))
    note = f"; ignored: {'; '.join(notes)}" if notes else ""
    if not holds:
        return None, note
    pod, entry, until, capped = max(holds, key=lambda h: h[2])
    fresh = tuple(e for _, e, _, _ in holds if (e.pod, e.asked) not in seen)
    why = f" (capped by maxDelay {format_duration(cap)}; asked {entry.asked})" if capped else ""
    reason = f"kept up until {until.isoformat()} by {pod} ({KEEP_UP_UNTIL_ANNOTATION}){why}{note}"
    save = None
    if fresh:
        base = record if record is not None else Record(current, "up", now)
        # The wait for running pods starts with it: kept up and then postponed, a group stays up maxDelay at most.
        save = replace(base, kept_up=(*base.kept_up, *fresh), busy_since=base.busy_since or now)
    told = tuple(
        PodNotice(og.group.name, p, _kept_text(og.group.name, u, c, cap, e.asked), keep_up_event(p, e), KEPT_UP)
        for p, e, u, c in holds
        if e in fresh
    )
    return GroupSkip(og.group.name, reason, save_record=save, kept=told), ""


def _kept_text(group: str, until: datetime, capped: bool, cap: timedelta, asked: str) -> str:
    why = f", capped by the group's maxDelay {format_duration(cap)}; asked {asked}" if capped else ""
    return f"Node group {group} stays up until {until:%a %Y-%m-%d %H:%M %Z} for this pod (gpu-jobs/keep-up-until{why})"


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
    if record is not None and record.phase == "up" and (record.busy_since or record.drain_blocked or record.kept_up):
        # A postponed or blocked shutdown never happened and working hours are back: forget when the wait began
        # and why the drain gave up, or the next evening would start with the wait used up and the drain backed off.
        return GroupSkip(
            rg.name,
            "working hours are back: the wait for running GPU pods is over",
            save_record=replace(record, busy_since=None, drain_blocked=None, kept_up=()),
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
