"""The ``sweep:`` section of the policy: idle GPU pods and leaked VRAM (per cluster, from DCGM metrics in each
cluster's Prometheus) and GPU instances missing their owner tags (per account scope), warned first and acted on
after a grace period.

Its models share the policy's base and field types (``jobs.core.policy_fields``); the root model
(``jobs.core.policy``) imports this module.
"""

from __future__ import annotations

from datetime import timedelta
from fractions import Fraction
from typing import Final, Literal

from pydantic import Field, StrictInt, model_validator

from jobs.core.limits import ChangeLimit
from jobs.core.policy_fields import Duration, Model, NamespacePattern, Percent, WindowDuration, percent
from jobs.core.timespec import parse_duration

#: The DCGM metrics that can say whether a GPU works: an integer percent (not emitted for MIG slices), or the
#: graphics engine's active ratio (0..1, works on MIG slices, needs DCGM profiling metrics).
GPU_UTIL: Final = "DCGM_FI_DEV_GPU_UTIL"
GR_ENGINE_ACTIVE: Final = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UtilMetric = Literal["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
PodAction = Literal["delete", "scale-owner", "annotate"]
InstanceAction = Literal["stop", "terminate", "tag-only"]


class LabelNames(Model):
    """Which series labels name the pod: ``{pod: exported_pod, namespace: exported_namespace}`` for a
    ServiceMonitor without ``honorLabels``."""

    pod: str = Field(min_length=1, max_length=100)
    namespace: str = Field(min_length=1, max_length=100)


class Exempt(Model):
    namespaces: tuple[NamespacePattern, ...] = Field(default=(), max_length=500, description="names or globs")
    annotation: str = Field(default="gpu-jobs/keep-alive", min_length=1, max_length=253)


class IdlePods(Model):
    metric: UtilMetric = GPU_UTIL
    below: float = Field(default=5, gt=0, le=100, description="percent, averaged over the window")
    window: Duration = "2h"
    labels: Literal["auto"] | LabelNames = "auto"
    grace_period: Duration = "30m"
    action: PodAction = "annotate"
    exempt: Exempt = Exempt()
    # A person's gpu-jobs/keep-alive-until is honoured for at most this long from when the sweep first sees it: a
    # forgotten "2099" snooze ends. Never "no cap": a pod that must never be swept is exempted instead. Up to 31d
    # (WindowDuration's limit): a fortnight's holiday fits, where settings stop at 7d.
    max_snooze: WindowDuration = Field(
        default="7d", description="how long a keep-alive-until snooze lasts at most, from when first seen; <= 31d"
    )

    @property
    def window_td(self) -> timedelta:
        return parse_duration(self.window)

    @property
    def grace(self) -> timedelta:
        return parse_duration(self.grace_period)

    @property
    def max_snooze_td(self) -> timedelta:
        return parse_duration(self.max_snooze)

    @model_validator(mode="after")
    def _window_long_enough(self) -> IdlePods:
        if self.window_td < timedelta(minutes=5):
            raise ValueError(f"window {self.window} is shorter than 5m: too few scrapes to call a GPU idle")
        return self


class LeakedMemory(Model):
    """Idle but VRAM full: a workload that crashed and left its memory allocated."""

    util_below: float = Field(default=1, gt=0, le=100, description="percent")
    memory_used_above: Percent = "90%"

    @property
    def memory_ratio(self) -> Fraction:
        return percent(self.memory_used_above)

    @model_validator(mode="after")
    def _ratio(self) -> LeakedMemory:
        if self.memory_ratio > 1:
            raise ValueError(f"memoryUsedAbove {self.memory_used_above} is above 100%")
        return self


class InstanceScope(Model):
    """Accounts to sweep besides those of the policy's clusters."""

    cloud: Literal["aws", "gcp", "azure"]
    regions: tuple[str, ...] = Field(default=(), max_length=50)  # aws
    projects: tuple[str, ...] = Field(default=(), max_length=50)  # gcp
    subscriptions: tuple[str, ...] = Field(default=(), max_length=50)  # azure

    @model_validator(mode="after")
    def _fits_cloud(self) -> InstanceScope:
        field = {"aws": "regions", "gcp": "projects", "azure": "subscriptions"}[self.cloud]
        others = [f for f in ("regions", "projects", "subscriptions") if f != field and getattr(self, f)]
        if others:
            raise ValueError(f"cloud {self.cloud} takes `{field}:`, not {others}")
        if not getattr(self, field):
            raise ValueError(f"cloud {self.cloud} needs `{field}:`")
        return self

    @property
    def accounts(self) -> tuple[str, ...]:
        return self.regions or self.projects or self.subscriptions


class UntaggedInstances(Model):
    required_tags: tuple[str, ...] = Field(min_length=1, max_length=50, description="labels on GCP")
    scopes: tuple[InstanceScope, ...] = Field(default=(), max_length=50)
    grace_period: Duration = "24h"
    action: InstanceAction = "tag-only"
    protect_tag: str = Field(default="gpu-jobs/protect", min_length=1, max_length=128)

    @property
    def grace(self) -> timedelta:
        return parse_duration(self.grace_period)


class SweepLimits(Model):
    max_actions_per_run: StrictInt = Field(default=10, ge=0)
    max_percent_per_run: Percent = "20%"

    @property
    def limit(self) -> ChangeLimit:
        """Both bounds at once: whichever allows fewer actions."""
        return ChangeLimit(count=self.max_actions_per_run, percent=float(percent(self.max_percent_per_run) * 100))


class Sweep(Model):
    idle_pods: IdlePods | None = None
    leaked_memory: LeakedMemory | None = None
    untagged_instances: UntaggedInstances | None = None
    limits: SweepLimits = SweepLimits()

    @model_validator(mode="after")
    def _something(self) -> Sweep:
        if self.leaked_memory is not None and self.idle_pods is None:
            raise ValueError("leakedMemory needs idlePods (its window, grace period, action and exemptions)")
        return self
