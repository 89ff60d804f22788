"""Cloud GPU quotas, pure: what a quota must be (its effective target, from the policy and the cloud's own
conversion data) and what to do about it, from what was observed and what was asked before. No I/O.

Per entry the action is one of:

=========  ====================================================================================  ===========
action     when                                                                                  exit
=========  ====================================================================================  ===========
error      the quota or a shape cannot be judged, or the quota cannot be raised                  failed (1)
pending    a request is open in the cloud (ours or a person's): never a second one               ok
none       the limit is at or above the target (also when a person raised it since the last run) ok
denied     the request for this target and max was denied: not filed again until they change    failed (1)
partial    it was granted below what was asked: likewise                                         failed (1)
request    the limit is below the target: file one request for the target                        ok
=========  ====================================================================================  ===========

A limit that stays below its target is an alert (the Job fails); a request the cloud is still deciding is not.
The target is never a decrease and never above ``max``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from jobs.core.policy_cloud_quotas import CloudQuota, InstancesTarget, NodeGroupsTarget
from jobs.core.policy_fields import percent

Action = Literal["request", "none", "pending", "denied", "partial", "error"]
#: How a request stands: the cloud is deciding, or decided (approved in full, in part, or not at all).
Outcome = Literal["open", "approved", "partial", "denied"]
FAILED_ACTIONS: frozenset[Action] = frozenset({"denied", "partial", "error"})


@dataclass(frozen=True)
class CloudRequest:
    """A quota request as the cloud reports it, with the cloud's own ids (case id, trace id...)."""

    id: str
    status: str  # the cloud's word: PENDING, CASE_OPENED, APPROVED, reconciling, Succeeded, Failed...
    outcome: Outcome
    value: int  # what was asked for
    granted: int | None = None  # what was granted, when the cloud says
    ids: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        extra = "".join(f" {k} {v}" for k, v in sorted(self.ids.items()))
        granted = f", granted {self.granted}" if self.granted is not None and self.outcome != "open" else ""
        return f"request {self.id} ({self.status}{granted}{extra}) for {self.value}"


@dataclass(frozen=True)
class QuotaFacts:
    """One quota as the cloud reports it now."""

    unit: str  # "vCPU", "GPU"
    limit: int | None  # None only with ``error``
    usage: int | None = None  # read only for headroom
    fixed: str | None = None  # why the cloud will not raise it (not Adjustable, isFixed, not eligible)
    open_request: CloudRequest | None = None  # an open request for this quota, whoever filed it
    followed: CloudRequest | None = None  # the remembered request, as the cloud reports it now
    error: str | None = None  # the quota cannot be judged (an unknown code or family)


@dataclass(frozen=True)
class Shape:
    """One instance type, machine type or VM size in the quota's unit, from the cloud's own data."""

    name: str
    per_instance: int  # vCPUs or GPUs of one instance
    unit: str
    family: str | None = None  # AWS G/P; Azure the VM family; GCP the GPU family
    capacity: str | None = None  # a node group's: on-demand or spot


@dataclass(frozen=True)
class GroupSize:
    """A node group's shape (from the cloud) and its working maximum (the policy's up.max, else the live max)."""

    name: str
    shape: str  # the instance type / machine type / VM size
    max: int
    capacity: str = "on-demand"  # on-demand or spot
    zones: int = 1  # GKE: the pool's zones; the policy's up.max counts nodes per zone there

    def at_policy_max(self, up_max: int) -> GroupSize:
        """The working maximum the policy gives (``up.max``, per zone on GKE), in instances."""
        return replace(self, max=up_max * self.zones)


@dataclass(frozen=True)
class DemandPart:
    what: str  # a node group, or "instances"
    count: int
    shape: Shape

    @property
    def value(self) -> int:
        return self.count * self.shape.per_instance

    def text(self) -> str:
        return f"{self.what}: {self.count} x {self.shape.name} x {self.shape.per_instance} {self.shape.unit}"


@dataclass(frozen=True)
class Demand:
    parts: tuple[DemandPart, ...] = ()
    error: str | None = None

    @property
    def value(self) -> int:
        return sum(p.value for p in self.parts)

    def text(self) -> str | None:
        if not self.parts:
            return None
        body = " + ".join(p.text() for p in self.parts)
        return f"{body} = {self.value}"


@dataclass(frozen=True)
class Asked:
    """What the job asked for, remembered in the install's cluster: a denied or partial request is not filed again
    until the target or ``max`` changes, and a request whose answer was lost is found again, never refiled."""

    value: int
    target: int
    max: int | None
    request_id: str | None  # None: the answer to the request was lost
    status: str
    outcome: Outcome
    at: datetime


@dataclass(frozen=True)
class Unreadable:
    """What was asked, stored but not decodable (edited by hand): that entry fails, the others go on."""

    why: str


@dataclass(frozen=True)
class QuotaPlan:
    entry: CloudQuota
    action: Action
    unit: str | None = None
    limit: int | None = None
    usage: int | None = None
    target: int | None = None
    demand: str | None = None
    request: CloudRequest | None = None  # the request the action is about (open, followed, decided)
    file: int | None = None  # action request: the value to ask for
    remember: Asked | None = None  # what to remember now (a new outcome), without filing anything
    reason: str = ""
    how: str = ""  # how the target was reached when it is not the demand (headroom, capped at max)

    @property
    def writes(self) -> bool:
        return self.action == "request" or self.remember is not None

    @property
    def failed(self) -> bool:
        return self.action in FAILED_ACTIONS


def demand_of(
    entry: CloudQuota,
    groups: Mapping[str, GroupSize | str],
    shapes: Mapping[str, Shape | str],
) -> Demand:
    """The entry's target in the quota's unit, converted with the cloud's data (``shapes``: per name, or why it is
    unknown; ``groups``: per node group, or why it cannot be read). A number needs no conversion."""
    target = entry.target
    if isinstance(target, int):
        return Demand()
    if isinstance(target, InstancesTarget):
        shape = shapes.get(target.shape, f"no data for {target.shape}")
        if isinstance(shape, str):
            return Demand(error=shape)
        return Demand((DemandPart("instances", target.instances, shape),))
    assert isinstance(target, NodeGroupsTarget)
    parts: list[DemandPart] = []
    for name in target.node_groups:
        group = groups.get(name, f"node group {name}: not read")
        if isinstance(group, str):
            return Demand(error=group)
        shape = shapes.get(group.shape, f"node group {name}: no data for {group.shape}")
        if isinstance(shape, str):
            return Demand(error=shape)
        if (why := _counts_against(entry, group, shape)) is not None:
            return Demand(error=why)
        parts.append(DemandPart(name, group.max, shape))
    return Demand(tuple(parts))


def _counts_against(entry: CloudQuota, group: GroupSize, shape: Shape) -> str | None:
    """A group counted against a quota of another family or capacity type is an error naming both."""
    kind = entry.aws_kind if entry.cloud == "aws" else None
    if kind is not None:
        family, capacity = kind
        if shape.family != family or group.capacity != capacity:
            return (
                f"node group {group.name} ({group.shape}: family {shape.family}, {group.capacity}) does not count"
                f" against quota {entry.name} (family {family}, {capacity})"
            )
    if entry.cloud == "gcp" and shape.unit == "GPU":
        wanted, preemptible = gcp_gpu_family(entry)
        spot = group.capacity == "spot"
        if (wanted is not None and shape.family != wanted) or spot != preemptible:
            counted = ("preemptible " if preemptible else "") + (wanted or "GPUs")
            return (
                f"node group {group.name} ({group.shape}: family {shape.family}, {group.capacity}) does not count"
                f" against quota {entry.name} ({counted})"
            )
    if entry.cloud == "azure" and entry.family and shape.family:
        wanted = entry.family.lower()
        spot = wanted == "lowprioritycores"
        if (spot and group.capacity != "spot") or (not spot and shape.family.lower() != wanted):
            return (
                f"node group {group.name} ({group.shape}: family {shape.family}, {group.capacity}) does not count"
                f" against quota {entry.name} ({entry.family})"
            )
    return None


GCP_FAMILY_QUOTA = re.compile(r"(?P<preemptible>PREEMPTIBLE-)?(?P<family>NVIDIA-[A-Z0-9-]+?)-GPUS-per-project-region")


def gcp_gpu_family(entry: CloudQuota) -> tuple[str | None, bool]:
    """The GPU family a GCP GPU quota counts (None: every family) and whether it is the preemptible (Spot) one:
    ``gpu_family`` of ``GPUS-PER-GPU-FAMILY-per-project-region``, or the family in ``NVIDIA-L4-GPUS-...``."""
    quota_id = str(entry.quota_id or "")
    found = GCP_FAMILY_QUOTA.fullmatch(quota_id)
    if found is not None:
        return found["family"].replace("-", "_"), bool(found["preemptible"])
    return entry.gcp_dimensions.get("gpu_family"), quota_id.startswith("PREEMPTIBLE-")


def effective_target(entry: CloudQuota, base: int, limit: int, usage: int | None) -> tuple[int, str]:
    """The target with headroom (once usage passes ``whenUsageAbove`` of the limit: the limit plus ``raiseBy``),
    capped at ``max``; with the words that say how it was reached."""
    target, how = base, ""
    headroom = entry.headroom
    busy = (
        headroom is not None and usage is not None and limit > 0 and usage > percent(headroom.when_usage_above) * limit
    )
    if headroom is not None and busy:
        ahead = math.ceil(limit * (1 + percent(headroom.raise_by)))
        if ahead > target:
            target = ahead
            how = f"headroom: usage {usage} above {headroom.when_usage_above} of {limit}, +{headroom.raise_by}"
    if entry.max is not None and target > entry.max:
        target, how = entry.max, f"capped at max {entry.max}" + (f" ({how})" if how else "")
    return target, how


def plan_quota(
    entry: CloudQuota, facts: QuotaFacts, demand: Demand, remembered: Asked | Unreadable | None, now: datetime
) -> QuotaPlan:
    """The one decision for one quota (see the module's table)."""
    plan = QuotaPlan(entry, "error", facts.unit, facts.limit, facts.usage, demand=demand.text())
    if isinstance(remembered, Unreadable):
        return replace(plan, reason=f"what was asked cannot be read back: {remembered.why}")
    if facts.error is not None or facts.limit is None:
        return replace(plan, reason=facts.error or "the limit cannot be read")
    if demand.error is not None:
        return replace(plan, reason=demand.error)
    base = entry.target if isinstance(entry.target, int) else demand.value
    target, how = effective_target(entry, base, facts.limit, facts.usage)
    plan = replace(plan, target=target, how=how)
    followed = facts.followed
    remember = _changed(remembered, followed, now)
    open_request = facts.open_request or (followed if followed is not None and followed.outcome == "open" else None)
    if open_request is not None:
        return replace(
            plan, action="pending", request=open_request, remember=remember, reason=f"{open_request.describe()} is open"
        )
    if facts.limit >= target:
        why = f"limit {facts.limit} covers target {target}" + (f" ({how})" if how else "")
        return replace(plan, action="none", request=followed, remember=remember, reason=why)
    if facts.fixed is not None:
        return replace(plan, reason=f"limit {facts.limit} is below target {target}, and {facts.fixed}")
    decided = _decided(remembered, followed)
    if decided is not None and remembered is not None and (remembered.target, remembered.max) == (target, entry.max):
        outcome, request = decided
        return replace(
            plan,
            action=outcome,
            request=request,
            remember=remember,
            reason=(
                f"limit {facts.limit} is below target {target}: {request.describe() if request else 'the request'}"
                f" was {'denied' if outcome == 'denied' else 'granted in part'}; not filed again until the target or"
                " max changes"
            ),
        )
    return replace(
        plan,
        action="request",
        file=target,
        request=None,
        reason=f"limit {facts.limit} is below target {target}" + (f" ({how})" if how else ""),
    )


def _changed(remembered: Asked | None, followed: CloudRequest | None, now: datetime) -> Asked | None:
    """What to remember when the cloud's answer to the remembered request is news."""
    if remembered is None or followed is None:
        return None
    if (remembered.status, remembered.outcome, remembered.request_id) == (
        followed.status,
        followed.outcome,
        followed.id,
    ):
        return None
    return replace(remembered, request_id=followed.id, status=followed.status, outcome=followed.outcome, at=now)


def _decided(
    remembered: Asked | None, followed: CloudRequest | None
) -> tuple[Literal["denied", "partial"], CloudRequest | None] | None:
    if followed is not None and followed.outcome in ("denied", "partial"):
        return ("denied" if followed.outcome == "denied" else "partial"), followed
    if followed is None and remembered is not None and remembered.outcome in ("denied", "partial"):
        return ("denied" if remembered.outcome == "denied" else "partial"), None
    return None


def asked(plan: QuotaPlan, request: CloudRequest | None, now: datetime) -> Asked:
    """What is remembered of a request just filed (``request`` None: its answer was lost and it was not seen again)."""
    assert plan.file is not None
    assert plan.target is not None
    if request is None:
        return Asked(plan.file, plan.target, plan.entry.max, None, "UNKNOWN", "open", now)
    return Asked(plan.file, plan.target, plan.entry.max, request.id, request.status, request.outcome, now)


def summary(plans: Sequence[QuotaPlan]) -> dict[Action, int]:
    counts: dict[Action, int] = {}
    for p in plans:
        counts[p.action] = counts.get(p.action, 0) + 1
    return counts
