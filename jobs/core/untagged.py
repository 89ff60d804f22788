"""Untagged GPU instances, pure: which GPU instances of one account miss a required tag, and the plan of marks,
clears and actions (stop, terminate) after the grace period."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Literal

from jobs.core.policy_sweep import InstanceAction, UntaggedInstances
from jobs.core.timespec import ECHO_LIMIT, quoted
from jobs.labels import SWEEP_MARK_TAG

InstanceState = Literal["running", "stopped", "other"]


@dataclass(frozen=True)
class GpuInstance:
    """A cloud instance (EC2 instance, Compute Engine instance, Azure VM) whose type has GPUs."""

    cloud: Literal["aws", "gcp", "azure"]
    account: str  # the scope's region (AWS), project (GCP) or subscription (Azure)
    id: str  # i-0abc...; projects/P/zones/Z/instances/N; the Azure resource id
    name: str
    zone: str  # availability zone, GCE zone, Azure location
    type: str  # p4d.24xlarge, a2-highgpu-1g, Standard_NC24ads_A100_v4
    gpus: int
    state: InstanceState
    tags: Mapping[str, str] = field(default_factory=dict)  # labels on GCP
    #: Why it must not be acted on one by one: "Auto Scaling group batch-g5", "managed instance group gke-...",
    #: "scale set aks-gpu-..." (the group would replace it). None: a standalone instance.
    group: str | None = None
    #: What a conditional write needs (GCP ``labelFingerprint``); None where the cloud has no such precondition.
    version: str | None = None


# --- tag names and the mark ---------------------------------------------------------------------------------------

Cloud = Literal["aws", "gcp", "azure"]
Verdict = Literal["protected", "member", "cleared", "marked", "acted"]
Write = Literal["mark", "unmark", "stop", "terminate"]

# GCP label values: lowercase letters, digits, "-" and "_", at most 63 characters; the mark fits on every cloud.
_MARK = re.compile(r"(?P<action>stop|terminate|tag-only)-after-(?P<due>\d{8}t\d{4})z")


def label_key(cloud: Cloud, name: str) -> str:
    """How a policy tag name is looked up on ``cloud``: GCP labels are lowercase and allow neither ``/`` nor ``.``
    (``gpu-jobs/protect`` is the label ``gpu-jobs_protect``); AWS tags and Azure tags keep the name as written."""
    if cloud == "gcp":
        return name.lower().replace("/", "_").replace(".", "_")
    return name


@dataclass(frozen=True)
class Mark:
    """What the mark tag says: the action planned and the minute it is due (UTC)."""

    action: InstanceAction
    due: datetime

    @property
    def value(self) -> str:
        return mark_value(self.action, self.due)


def due_at(now: datetime, grace: timedelta) -> datetime:
    """When a mark made at ``now`` is due: ``now + grace``, rounded *up* to the minute the mark can say, in UTC, so
    no instance is acted on before its full grace period."""
    due = (now + grace).astimezone(UTC)
    whole = due.replace(second=0, microsecond=0)
    return whole if whole == due else whole + timedelta(minutes=1)


def mark_value(action: InstanceAction, due: datetime) -> str:
    """``stop-after-20261203t1405z``: the action and the minute it is due, UTC, lowercase (a valid GCP label)."""
    return f"{action}-after-{due.astimezone(UTC):%Y%m%dt%H%M}z"


def parse_mark(value: str) -> Mark | None:
    """The mark a tag value holds, or None when it is not one this job wrote (edited by hand, truncated...)."""
    matched = _MARK.fullmatch(value.strip())
    if matched is None:
        return None
    try:
        due = datetime.strptime(matched["due"], "%Y%m%dt%H%M").replace(tzinfo=UTC)
    except ValueError:  # 20261399t2599: digits, but no instant
        return None
    action: InstanceAction = matched["action"]  # type: ignore[assignment]  # the regex allows only these
    return Mark(action, due)


# --- the judgement ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InstancePlan:
    """What the sweep reports about one GPU instance, and the one write it makes there (None: none)."""

    instance: GpuInstance
    state: Verdict
    #: The policy's action where one is planned (marked, acted); None where nothing will be done (cleared, member,
    #: protected).
    action: InstanceAction | None
    missing: tuple[str, ...]  # the required tags it lacks, as the policy names them
    reason: str
    write: Write | None = None
    tags: Mapping[str, str | None] = field(default_factory=dict)  # for mark / unmark: set (str) or remove (None)
    due: datetime | None = None  # when the action is (or was) due, UTC

    @property
    def writes(self) -> bool:
        return self.write is not None

    @property
    def counts(self) -> bool:
        """An action against the change limit; marks and unmarks are writes that are not counted."""
        return self.write in ("stop", "terminate")


def missing_tags(section: UntaggedInstances, instance: GpuInstance) -> tuple[str, ...]:
    """The required tags the instance lacks; an empty (or blank) value names nobody, so it counts as missing."""
    return tuple(
        name for name in section.required_tags if not (instance.tags.get(label_key(instance.cloud, name)) or "").strip()
    )


def judge(section: UntaggedInstances, instance: GpuInstance, now: datetime) -> InstancePlan | None:
    """One instance, first match wins; None: nothing to report (tagged, or stopped and never marked)."""
    mark_key = label_key(instance.cloud, SWEEP_MARK_TAG)
    protect = label_key(instance.cloud, section.protect_tag)
    raw = instance.tags.get(mark_key)
    missing = missing_tags(section, instance)
    mark = parse_mark(raw) if raw is not None else None
    base = InstancePlan(instance, "marked", None, missing, "")
    if not missing and raw is None:
        return None  # tagged and never marked: nothing to say, group members included (a fleet has hundreds)
    if protect in instance.tags:
        return replace(base, state="protected", reason=f"protected by its {protect} tag: never marked or acted on")
    if instance.group is not None:
        return replace(
            base,
            state="member",
            reason=f"belongs to {instance.group}: never stopped one by one (the group would replace it)",
        )
    if not missing:
        if raw is None:
            return None
        return replace(
            base,
            state="cleared",
            reason="has every required tag now: the mark is removed",
            write="unmark",
            tags={mark_key: None},
        )
    action = section.action
    lacking = f"missing {', '.join(missing)}"
    if instance.state != "running":
        if raw is None:
            return None  # not running: costs no GPU hours; marked if it runs again
        if action == "tag-only":
            return replace(
                base, action=action, due=mark.due if mark else None, reason=f"{lacking}: {_what(action, None)}"
            )
        return replace(
            base,
            state="acted",
            action=action,
            due=mark.due if mark else None,
            reason=f"{lacking}; not running ({instance.state}): nothing more to do",
        )
    if mark is None or mark.action != action:
        # Never marked, a mark this job cannot read, or one that announced another action: the warning starts now.
        due = due_at(now, section.grace)
        why = (
            ""
            if raw is None
            else f" (its mark {quoted(raw, ECHO_LIMIT)} is replaced: "
            + ("not a mark this job wrote)" if mark is None else f"the action is now {action})")
        )
        return replace(
            base,
            action=action,
            write="mark",
            tags={mark_key: mark_value(action, due)},
            due=due,
            reason=f"{lacking}: {_what(action, due)}{why}",
        )
    if action == "tag-only" or now < mark.due:
        return replace(base, action=action, due=mark.due, reason=f"{lacking}: {_what(action, mark.due)}")
    return replace(
        base,
        state="acted",
        action=action,
        write=action,
        due=mark.due,
        reason=f"{lacking}; {action} was due at {_minute(mark.due)}",
    )


def plan_instances(
    section: UntaggedInstances, instances: Sequence[GpuInstance], now: datetime
) -> tuple[InstancePlan, ...]:
    """The reported instances of one account scope, by id (a compliant instance without a mark is left out)."""
    judged = (judge(section, i, now) for i in sorted(instances, key=lambda i: i.id))
    return tuple(p for p in judged if p is not None)


def _what(action: InstanceAction, due: datetime | None) -> str:
    if action == "tag-only" or due is None:
        return "marked only (action tag-only: nothing is stopped)"
    return f"{action} after {_minute(due)} unless tagged"


def _minute(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
