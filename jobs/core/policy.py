"""The typed policy model: what people write in ``gitops/policy.yaml``, and its root ``Policy``.

Field names are a contract (other tools read the same file), so the Python names are snake_case with camelCase
aliases that match the YAML. Unknown keys are rejected everywhere. The sections live in their own modules
(``policy_fields``, ``policy_schedule``, ``policy_fleet``, ``policy_quotas``, ``policy_cloud_quotas``,
``policy_sweep``) and are re-exported here; the view
planners read, resolved once, is ``Policy.resolved`` (``jobs.core.resolved``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from functools import cached_property
from typing import Any, Literal
from zoneinfo import ZoneInfo

from pydantic import Field

from jobs.core.policy_cloud_quotas import CloudQuota, cloud_quota_problems
from jobs.core.policy_fields import (
    MAX_SETTING_DURATION,
    MAX_YEAR,
    MIN_YEAR,
    AwareDatetime,
    Clock,
    Cron,
    DaySet,
    Duration,
    KubeContext,
    Model,
    Name,
    NamespacePattern,
    PolicyDate,
    Timezone,
    WarmUp,
    WindowDuration,
    warm_up_of,
)
from jobs.core.policy_fleet import (
    DEFAULT_CLUSTER,
    AwsCluster,
    AwsLocator,
    AzureCluster,
    AzureLocator,
    Cluster,
    ClusterLocator,
    Fleet,
    GcpCluster,
    GcpLocator,
    NodeGroup,
    Problem,
    PrometheusSource,
    WorkingSize,
    declared_cluster_problems,
    resolve_fleet,
)
from jobs.core.policy_quotas import (
    Hard,
    LabelKey,
    LabelRequirement,
    LabelSelector,
    LabelValue,
    NamespaceQuotas,
    QuotaOffHours,
    QuotaRule,
)
from jobs.core.policy_schedule import Defaults, Holidays, Override, Schedule, WorkingHours
from jobs.core.policy_sweep import Sweep
from jobs.core.resolved import ResolvedPolicy, resolve, schedule_fields

__all__ = [
    "API_VERSION",
    "DEFAULT_CLUSTER",
    "KIND",
    "MAX_SETTING_DURATION",
    "MAX_YEAR",
    "MIN_YEAR",
    "AwareDatetime",
    "AwsCluster",
    "AwsLocator",
    "AzureCluster",
    "AzureLocator",
    "Clock",
    "Cluster",
    "ClusterLocator",
    "Cron",
    "DaySet",
    "Defaults",
    "Duration",
    "GcpCluster",
    "GcpLocator",
    "Hard",
    "Holidays",
    "KubeContext",
    "LabelKey",
    "LabelRequirement",
    "LabelSelector",
    "LabelValue",
    "Model",
    "Name",
    "NamespacePattern",
    "NamespaceQuotas",
    "NodeGroup",
    "Override",
    "Policy",
    "PolicyDate",
    "PrometheusSource",
    "QuotaOffHours",
    "QuotaRule",
    "Schedule",
    "Timezone",
    "WarmUp",
    "WindowDuration",
    "WorkingHours",
    "WorkingSize",
    "cross_reference_problems",
    "effective_schedule",
    "warm_up_of",
]

API_VERSION = "gpu-jobs/v1"
KIND = "GpuPolicy"


class Policy(Model):
    api_version: Literal["gpu-jobs/v1"]
    kind: Literal["GpuPolicy"]
    defaults: Defaults = Defaults()
    clusters: tuple[Cluster, ...] = Field(
        default=(),
        max_length=100,
        description="the fleet; may be omitted when the node groups' locators say it (one cluster per locator)",
    )
    node_groups: tuple[NodeGroup, ...] = Field(default=(), max_length=500)
    overrides: tuple[Override, ...] = Field(default=(), max_length=500)
    namespace_quotas: NamespaceQuotas | None = None
    cloud_quotas: tuple[CloudQuota, ...] = Field(default=(), max_length=200)
    sweep: Sweep | None = None

    def group(self, name: str) -> NodeGroup:
        for group in self.node_groups:
            if group.name == name:
                return group
        raise KeyError(name)

    @cached_property
    def _fleet(self) -> Fleet:
        return resolve_fleet(self.clusters, self.node_groups)

    @cached_property
    def resolved(self) -> ResolvedPolicy:
        """Every node group and quota rule resolved once (a validated policy only: ``parse_policy`` builds it)."""
        return resolve(self)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Policy:
        """A copy whose derived views are derived again: pydantic copies them as they are, and a copy with other
        node groups would otherwise plan with the original's."""
        copy = super().model_copy(update=update, deep=deep)
        for derived in ("_fleet", "resolved"):
            copy.__dict__.pop(derived, None)
        return copy

    @property
    def fleet(self) -> tuple[Cluster, ...]:
        """The declared clusters, or those the node groups imply when ``clusters`` is omitted."""
        return self._fleet.clusters

    def cluster(self, name: str) -> Cluster:
        for cluster in self.fleet:
            if cluster.name == name:
                return cluster
        raise KeyError(name)

    def cluster_of(self, group: NodeGroup) -> Cluster:
        """The cluster whose Kubernetes API sees the group's nodes (always resolves in a validated policy)."""
        return self.cluster(self._fleet.membership[group.name])

    def groups_in(self, cluster: str) -> tuple[NodeGroup, ...]:
        return tuple(g for g in self.node_groups if self._fleet.membership.get(g.name) == cluster)


def cross_reference_problems(policy: Policy) -> list[Problem]:
    """Rules that span entries (unique names, overrides that name a group), as (path, message) pairs."""
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, group in enumerate(policy.node_groups):
        if group.name in seen:
            problems.append(
                (("nodeGroups", i, "name"), f'"{group.name}" is already used by nodeGroups[{seen[group.name]}]')
            )
        seen.setdefault(group.name, i)
    locators: dict[Any, int] = {}
    for i, group in enumerate(policy.node_groups):
        key = group.locator
        if key in locators:
            problems.append(((("nodeGroups", i, group.cloud)), f"same node group as nodeGroups[{locators[key]}]"))
        locators.setdefault(key, i)
    for i, override in enumerate(policy.overrides):
        if override.node_group not in seen:
            problems.append((("overrides", i, "nodeGroup"), f'unknown node group "{override.node_group}"'))
    return problems + declared_cluster_problems(policy.clusters) + policy._fleet.problems + cloud_quota_problems(policy)


def effective_schedule(
    policy: Policy, group: NodeGroup
) -> tuple[ZoneInfo, Holidays | None, tuple[WorkingHours, ...], timedelta]:
    """A group's own schedule fields, each falling back to ``defaults`` (resolved once: ``policy.resolved``)."""
    return schedule_fields(policy.defaults, group)
