"""The typed policy model: what people write in ``gitops/policy.yaml``, and its root ``Policy``.

Field names are a contract (other tools read the same file), so the Python names are snake_case with camelCase
aliases that match the YAML. Unknown keys are rejected everywhere. The sections live in their own modules
(``policy_fields``, ``policy_schedule``, ``policy_fleet``, ``policy_quotas``, ``policy_cloud_quotas``,
``policy_sweep``) and are re-exported here. This is validated data only: the checks that span sections are
``jobs.core.policy_checks``, and the view planners read, resolved once by the loader, is ``jobs.core.resolved``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any, Literal

from pydantic import Field, model_validator

from jobs.core.policy_cloud_quotas import CloudQuota
from jobs.core.policy_fields import (
    MAX_SETTING_DURATION,
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
    KarpenterLocator,
    NodeGroup,
    PrometheusSource,
    WorkingSize,
    cloud_of_sections,
    resolve_fleet,
)
from jobs.core.policy_history import History, Pricing
from jobs.core.policy_notify import Notify
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

__all__ = [
    "API_VERSION",
    "DEFAULT_CLUSTER",
    "KIND",
    "MAX_SETTING_DURATION",
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
    "KarpenterLocator",
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
    notify: Notify | None = None  # people hear warnings, wakes and marks: one message per owner
    history: History = History()
    pricing: Pricing = Pricing()

    _section_clouds = model_validator(mode="before")(cloud_of_sections)  # a NodePool's cloud is its cluster's

    def group(self, name: str) -> NodeGroup:
        for group in self.node_groups:
            if group.name == name:
                return group
        raise KeyError(name)

    @cached_property
    def _fleet(self) -> Fleet:
        return resolve_fleet(self.clusters, self.node_groups)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Policy:
        """A copy whose fleet is derived again: pydantic copies it as it is, and a copy with other node groups would
        otherwise place them with the original's."""
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("_fleet", None)
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
