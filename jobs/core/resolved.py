"""The policy resolved once, at load: what every planner reads instead of re-deriving it.

Per node group: its provider (from the locator, through the provider table), the node label that picks its
nodes, its cluster, the identity its record carries, its schedule compiled once, and its settings as values.
Per quota rule: its off-hours schedule compiled once. Built by the loader (``jobs.policy_file``) for every policy it
validates; a planner reads it with :func:`view_of`. The policy model knows nothing of this view: it is derived from
the policy, never stored in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Literal
from weakref import finalize
from zoneinfo import ZoneInfo

from jobs.core.group_identity import GroupIdentity
from jobs.core.policy import Policy
from jobs.core.policy_fields import MAX_SETTING_DURATION, warm_up_of
from jobs.core.policy_fleet import NodeGroup
from jobs.core.policy_quotas import QuotaRule
from jobs.core.policy_schedule import Defaults, Holidays, WorkingHours
from jobs.core.providers import ProviderKind, ProviderRules, rules_for
from jobs.core.schedule import GroupSchedule, compiled_schedule
from jobs.core.timespec import parse_duration

#: With onBusy wait: how long a shutdown is postponed while GPU pods run (the policy's maxDelay).
DEFAULT_MAX_DELAY = timedelta(hours=2)
#: How long evictions may take (the policy's drainTimeout).
DEFAULT_DRAIN_TIMEOUT = timedelta(minutes=10)


@dataclass(frozen=True)
class GroupSettings:
    """How a group goes down, each setting falling back to ``defaults`` and then to the documented default."""

    warm_up: timedelta
    on_busy: Literal["wait", "drain", "force"]
    max_delay: timedelta
    after_delay: Literal["drain", "force", "stay"]
    drain_timeout: timedelta
    warn_before: timedelta = timedelta(0)  # how long before a shutdown its GPU pods are warned (0: never)


@dataclass(frozen=True)
class ResolvedGroup:
    name: str
    kind: ProviderKind
    group: NodeGroup
    rules: ProviderRules
    cluster: str  # the policy's cluster whose Kubernetes API sees the group's nodes
    cloud_cluster: str | None  # the cluster's name in the cloud (EKS/GKE/AKS locators); None for a plain ASG
    identity: GroupIdentity  # what the group's record describes
    node_label: tuple[str, str] | None  # the provider's label on its nodes (None: plain ASG)
    schedule: GroupSchedule
    settings: GroupSettings

    @property
    def node_selector(self) -> Mapping[str, str] | None:
        """The labels that pick the group's nodes: the provider's label, else every key of the policy's
        nodeSelector; None when neither says."""
        if self.node_label is not None:
            return MappingProxyType({self.node_label[0]: self.node_label[1]})
        return MappingProxyType(dict(self.group.node_selector)) if self.group.node_selector else None


@dataclass(frozen=True)
class ResolvedQuotaRule:
    rule: QuotaRule
    off_hours: GroupSchedule | None  # the working hours outside which the rule's offHours limits hold

    def off_hours_at(self, at: datetime) -> bool:
        """Whether the rule's offHours limits hold at ``at`` (timezone-aware; evaluated once per instant)."""
        return self.off_hours is not None and not self.off_hours.working_at(at)


class ResolvedPolicy:
    """Every node group and quota rule of a validated policy, resolved."""

    def __init__(self, groups: tuple[ResolvedGroup, ...], quota_rules: tuple[ResolvedQuotaRule, ...]) -> None:
        self.groups = groups
        self.quota_rules = quota_rules  # in the order of namespaceQuotas.rules
        self.by_name: Mapping[str, ResolvedGroup] = MappingProxyType({g.name: g for g in groups})

    def group(self, name: str) -> ResolvedGroup:
        return self.by_name[name]


def schedule_fields(
    defaults: Defaults, group: NodeGroup
) -> tuple[ZoneInfo, Holidays | None, tuple[WorkingHours, ...], timedelta]:
    """A group's own schedule fields, each falling back to ``defaults``."""
    tz = ZoneInfo(group.timezone or defaults.timezone)
    holidays = group.holidays if group.holidays is not None else defaults.holidays
    windows = group.working_hours if group.working_hours is not None else (defaults.working_hours or ())
    # A group's own warmUp, "0s" included, replaces the default's (None falls back).
    warm = group.warm_up if group.warm_up is not None else defaults.warm_up
    return tz, holidays, windows, warm_up_of(warm)


def _settings(defaults: Defaults, group: NodeGroup, warm_up: timedelta) -> GroupSettings:
    max_delay = group.max_delay or defaults.max_delay
    drain_timeout = group.drain_timeout or defaults.drain_timeout
    return GroupSettings(
        warm_up=warm_up,
        on_busy=group.on_busy or defaults.on_busy or "wait",
        max_delay=parse_duration(max_delay, MAX_SETTING_DURATION) if max_delay else DEFAULT_MAX_DELAY,
        after_delay=group.after_delay or defaults.after_delay or "drain",
        drain_timeout=parse_duration(drain_timeout, MAX_SETTING_DURATION) if drain_timeout else DEFAULT_DRAIN_TIMEOUT,
        # A group's own warnBefore, "0s" included, replaces the default's (None falls back), as warmUp does.
        warn_before=warm_up_of(group.warn_before if group.warn_before is not None else defaults.warn_before),
    )


def _group(policy: Policy, group: NodeGroup) -> ResolvedGroup:
    rules = rules_for(group.cloud, group.locator)
    cluster = policy.cluster_of(group).name
    locator = group.locator
    label_value = getattr(locator, rules.group_field)
    tz, holidays, windows, warm_up = schedule_fields(policy.defaults, group)
    overrides = tuple(o for o in policy.overrides if o.node_group == group.name)
    cloud_cluster = group.cluster_locator.cluster if group.cluster_locator is not None else None
    if overrides or group.always_on:
        schedule = GroupSchedule(tz, holidays, windows, warm_up, overrides, always_on=group.always_on)
    else:
        # Groups with the same schedule share one: asked once per ``now`` however many groups there are.
        schedule = compiled_schedule(tz, holidays, windows, warm_up)
    return ResolvedGroup(
        name=group.name,
        kind=rules.kind,
        group=group,
        rules=rules,
        cluster=cluster,
        cloud_cluster=cloud_cluster,
        identity=GroupIdentity.of(cluster, group.cloud, locator.model_dump(by_alias=True, exclude_none=True)),
        node_label=(rules.node_label, str(label_value)) if rules.node_label is not None else None,
        schedule=schedule,
        settings=_settings(policy.defaults, group, warm_up),
    )


def _quota_rule(policy: Policy, rule: QuotaRule) -> ResolvedQuotaRule:
    off = rule.off_hours
    if off is None:
        return ResolvedQuotaRule(rule, None)
    tz = ZoneInfo(off.timezone or policy.defaults.timezone)
    holidays = off.holidays if off.holidays is not None else policy.defaults.holidays
    return ResolvedQuotaRule(rule, compiled_schedule(tz, holidays, off.working_hours))


#: The view of each live policy, by the policy's id: built once per policy, dropped with it (the policy is plain
#: data and holds no view; a copy is another policy, resolved on its own).
_VIEWS: dict[int, ResolvedPolicy] = {}


def resolve(policy: Policy) -> ResolvedPolicy:
    """Resolve a validated policy (the loader does, once) and keep the view for :func:`view_of`."""
    rules = policy.namespace_quotas.rules if policy.namespace_quotas is not None else ()
    view = ResolvedPolicy(
        tuple(_group(policy, g) for g in policy.node_groups),
        tuple(_quota_rule(policy, r) for r in rules),
    )
    if _VIEWS.setdefault(id(policy), view) is view:
        finalize(policy, _VIEWS.pop, id(policy), None)
    return _VIEWS[id(policy)]


def view_of(policy: Policy) -> ResolvedPolicy:
    """The view the loader built for ``policy``; built now for a policy that did not come through the loader (a
    test's, or a copy with other node groups). The policy must be valid (``jobs.policy_file`` checks it)."""
    view = _VIEWS.get(id(policy))
    return view if view is not None else resolve(policy)
