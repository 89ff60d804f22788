"""``plan_nodegroups``: from the policy, what was observed and ``now``, the changes that converge every group.

Pure. Level-triggered: it computes what should be true now, so a missed run converges on the next one, and
no-ops are dropped here, so a second run right after the first plans nothing.

Records: before the first change of a shutdown, the group's configuration is recorded (phase ``stopping``); when
the last step is done the phase becomes ``down``; after a restore, ``up``. A record in phase ``stopping`` or
``down`` is never overwritten by a later observation, so a crash at any point loses nothing. A record in phase
``up`` is replaced at the next shutdown: manual changes made during working hours are the new normal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from jobs.core.limits import ChangeLimit
from jobs.core.nodegroups import GroupConfig, Record, SetPower, SetSize, Step, down_config, steps_between
from jobs.core.policy import NodeGroup, Policy
from jobs.core.providers import PROVIDERS, ProviderKind
from jobs.core.schedule import desired_state
from jobs.core.timespec import parse_duration
from jobs.labels import CA_CLUSTER_TAG, CA_ENABLED_TAG

DEFAULT_MAX_DELAY = timedelta(hours=2)
DEFAULT_DRAIN_TIMEOUT = timedelta(minutes=10)
#: The Event reason of a restore the provider accepted but could not deliver (stockout, quota).
RESTORE_NOT_DELIVERED = "RestoreNotDelivered"


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

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ObservedGroup:
    group: NodeGroup
    kind: ProviderKind
    config: GroupConfig | None  # None: could not be read (see error)
    record: Record | None = None
    pods: tuple[GpuPod, ...] = ()  # GPU pods on the group's nodes
    nodes: tuple[str, ...] = ()
    error: str | None = None  # the cloud could not be read
    cluster: str = ""  # the cluster whose API the pods and nodes were read from
    nodes_error: str | None = None  # the group's nodes could not be identified or read in that cluster
    record_error: str | None = None  # its record exists but cannot be used
    cordoned: tuple[str, ...] = ()  # its nodes a drain of this job left cordoned (marked as the job's)


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

    @property
    def writes(self) -> bool:
        return bool(self.actions) or any(s.save_record or s.event for s in self.skips)

    @property
    def failures(self) -> tuple[GroupSkip, ...]:
        return tuple(s for s in self.skips if s.failed)


def _setting(policy: Policy, group: NodeGroup, name: str) -> str | None:
    value: str | None = getattr(group, name) or getattr(policy.defaults, name)
    return value


def _known(kind: ProviderKind, config: GroupConfig, record: Record | None) -> GroupConfig:
    """Fill a size the provider does not report (GKE) from what this job itself did last."""
    if config.desired is not None or record is None:
        return config
    if record.phase == "down" and not config.autoscaling:
        return replace(config, desired=0)
    return config  # phase stopping: unknown, so the resize is sent again (it is idempotent)


def restore_config(
    group: NodeGroup, kind: ProviderKind, current: GroupConfig, record: Record | None
) -> GroupConfig | None:
    """What "up" means for this group: the policy's working size over the recorded configuration."""
    if record is None and group.up is None:
        return None
    base = record.config if record is not None else current
    target = replace(base, stopped=False, busy=False, shortfall=None, missing=0)
    if group.up is not None:
        target = replace(target, min=group.up.min, desired=group.up.desired, max=group.up.max)
        if record is None:
            target = _default_autoscaling(group, kind, target)
    return target


def _default_autoscaling(group: NodeGroup, kind: ProviderKind, target: GroupConfig) -> GroupConfig:
    """With a policy size but no record, turn the autoscaler back on the way the provider normally has it."""
    if kind == "eks" and group.aws is not None and group.aws.cluster is not None:
        tags = {CA_ENABLED_TAG: "true", CA_CLUSTER_TAG.format(cluster=group.aws.cluster): "owned"}
        return replace(target, autoscaling=True, autoscaler_tags=tags)
    if kind in ("gke", "aks"):
        return replace(target, autoscaling=target.min < target.max)
    return target


def _wait_over(record: Record | None, now: datetime, max_delay: timedelta) -> bool:
    return record is not None and record.busy_since is not None and now - record.busy_since >= max_delay


def _plan_down(
    policy: Policy, og: ObservedGroup, current: GroupConfig, reason: str, now: datetime
) -> GroupAction | GroupSkip | None:
    group, record = og.group, og.record
    target = down_config(og.kind, current, stop=group.strategy == "stop", wake_up=group.autoscaler_wake_up)
    steps = steps_between(og.kind, current, target)
    if not steps:
        if record is not None and record.phase == "stopping":
            # A previous run made every change but crashed before marking the record: finish the bookkeeping.
            return GroupAction(group.name, og.kind, "down", reason, current, target, (), False, record)
        return None
    unseen = _unseen(og, current)
    if unseen is not None:
        return GroupSkip(group.name, f"not shut down: {unseen}", warning=True, failed=True)
    keep_alive = [p for p in og.pods if not p.evictable]
    if keep_alive:
        names = ", ".join(map(str, keep_alive))
        return GroupSkip(group.name, f"stays up: pods that must not be evicted are running ({names})", warning=True)
    evict: tuple[GpuPod, ...] = ()
    doomed: tuple[GpuPod, ...] = ()
    if og.pods:
        names = ", ".join(map(str, og.pods))
        mode = _setting(policy, group, "on_busy") or "wait"
        if mode == "wait":
            max_delay = parse_duration(_setting(policy, group, "max_delay") or "2h")
            if not _wait_over(record, now, max_delay):
                since = record.busy_since if record is not None and record.busy_since else now
                save = None
                if record is None or record.busy_since is None:
                    base = record or Record(current, "up", now)
                    save = replace(base, busy_since=now)
                until = (since + max_delay).isoformat()
                return GroupSkip(
                    group.name, f"shutdown postponed until {until}: GPU pods running ({names})", save_record=save
                )
            mode = _setting(policy, group, "after_delay") or "drain"
            if mode == "stay":
                return GroupSkip(group.name, f"stays up after maxDelay: GPU pods running ({names})", warning=True)
        if mode == "drain":
            evict = og.pods
        else:
            doomed = og.pods
    take_record = record is None or record.phase == "up"
    drain_timeout = parse_duration(_setting(policy, group, "drain_timeout") or "10m")
    return GroupAction(
        group.name,
        og.kind,
        "down",
        reason,
        current,
        target,
        tuple(steps),
        take_record,
        None if take_record else record,
        evict=evict,
        cordon=og.nodes if evict else (),
        doomed=doomed,
        drain_timeout=drain_timeout,
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


def _plan_up(og: ObservedGroup, current: GroupConfig, reason: str) -> GroupAction | GroupSkip | None:
    group, record = og.group, og.record
    if record is not None and record.phase == "up" and record.busy_since is not None:
        # A postponed shutdown never happened and working hours are back: forget when the wait began, or the
        # next evening would start with the wait already used up.
        return GroupSkip(
            group.name,
            "working hours are back: the wait for running GPU pods is over",
            save_record=replace(record, busy_since=None),
        )
    is_down = record is not None and record.phase in ("stopping", "down")
    if record is None:
        looks_down = not steps_between(
            og.kind,
            current,
            down_config(og.kind, current, stop=group.strategy == "stop", wake_up=group.autoscaler_wake_up),
        )
        if not looks_down:
            return None  # up, and nothing of ours to undo
        is_down = True
    if not is_down:
        if current.shortfall is not None:
            # Restored earlier, and the provider has since said it could not bring every node: say so each run.
            return GroupSkip(group.name, f"up, but nodes are missing: {current.shortfall}", warning=True)
        return None  # phase up: what people changed during the day stands
    target = restore_config(group, og.kind, current, record)
    if target is None:
        return GroupSkip(group.name, "down with no record and no `up` size in the policy: not guessing", warning=True)
    steps = steps_between(og.kind, current, target)
    short = current.shortfall or (f"{current.missing} node(s) asked for are not there" if current.missing else None)
    if short is not None and not any(isinstance(s, SetSize | SetPower) for s in steps):
        # The size is back but the provider could not bring the nodes: resending it would change nothing, and
        # the rest of the restore waits for them. The record stays, so a later run finishes once they arrive.
        return GroupSkip(
            group.name,
            f"restore not delivered: {short} (size already requested; the next run looks again)",
            warning=True,
            failed=True,
            event=RESTORE_NOT_DELIVERED,
        )
    return GroupAction(group.name, og.kind, "up", reason, current, target, tuple(steps), False, record)


def plan_nodegroups(policy: Policy, observed: tuple[ObservedGroup, ...], now: datetime) -> NodeGroupPlan:
    actions: list[GroupAction] = []
    skips: list[GroupSkip] = []
    for og in observed:
        outcome = _plan_group(policy, og, now)
        if isinstance(outcome, GroupAction) and outcome.steps and og.config is not None and og.config.busy:
            # Someone else's update is running (a console change, an upgrade): converge on the next run rather
            # than queue behind it.
            outcome = GroupSkip(og.group.name, "an update is already running on the group: next run")
        draining = isinstance(outcome, GroupAction) and bool(outcome.evict)
        if og.cordoned and not draining and og.config is not None:
            # A cordon is the job's only while it drains: whatever else happens to the group, undo it.
            if isinstance(outcome, GroupAction):
                outcome = replace(outcome, uncordon=og.cordoned)
            else:
                actions.append(_uncordon_only(og, og.config))
        if isinstance(outcome, GroupAction):
            actions.append(outcome)
        elif isinstance(outcome, GroupSkip):
            skips.append(outcome)
    return NodeGroupPlan(tuple(actions), tuple(skips))


def _uncordon_only(og: ObservedGroup, current: GroupConfig) -> GroupAction:
    reason = "nodes a drain of this job cordoned, and no drain needs them cordoned now"
    return GroupAction(
        og.group.name,
        og.kind,
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


def _plan_group(policy: Policy, og: ObservedGroup, now: datetime) -> GroupAction | GroupSkip | None:
    if og.record_error is not None:
        reason = f"left as it is: {og.record_error} (fix or delete it: the sizes to restore are unknown)"
        return GroupSkip(og.group.name, reason, warning=True, failed=True)
    if og.config is None:
        return GroupSkip(og.group.name, f"cannot read the group: {og.error}", warning=True, failed=True)
    if og.config.system:
        return GroupSkip(og.group.name, PROVIDERS["aks"].never_down or "never scaled", warning=True)
    desired = desired_state(policy, og.group, now)
    current = _known(og.kind, og.config, og.record)
    if desired.state == "down":
        return _plan_down(policy, og, current, desired.reason, now)
    return _plan_up(og, current, desired.reason)


@dataclass(frozen=True)
class Refusal:
    reason: str
    plan: NodeGroupPlan  # what was refused: the reviewer must see it


def guard(plan: NodeGroupPlan, limit: ChangeLimit, considered: int) -> NodeGroupPlan | Refusal:
    """Blast-radius limit: a plan that changes more of the ``considered`` groups than ``limit`` allows needs a person
    to raise it."""
    changing = sum(1 for a in plan.actions if a.steps)
    reason = limit.refusal(changing, considered, "node groups")
    return plan if reason is None else Refusal(reason, plan)
