"""Idle GPU pods, pure: DCGM series (as Prometheus returns them) joined with the cluster's GPU pods, judged over the
window, and the plan of marks, unmarks and actions for one cluster."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Sample:
    """One series of an instant PromQL query: its labels (``__name__`` dropped by ``*_over_time``) and value."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Owner:
    """A pod's controller (its ``ownerReferences`` entry with ``controller: true``)."""

    kind: str  # ReplicaSet, StatefulSet, Job, DaemonSet, ...
    name: str
    uid: str


@dataclass(frozen=True)
class PodInfo:
    """A pod that asks for GPUs (whole, MIG or shared), as the cluster's API shows it now."""

    namespace: str
    name: str
    uid: str
    node: str | None
    phase: str  # Pending, Running, Unknown (Succeeded and Failed pods are not listed)
    gpus: int  # GPUs and GPU slices requested, summed over containers
    started: datetime | None  # status.startTime
    deleting: bool  # metadata.deletionTimestamp is set: Terminating, still listed and charged
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner: Owner | None = None
    resources: tuple[str, ...] = ()  # the GPU resource names it asks for (nvidia.com/gpu, nvidia.com/mig-1g.10gb)
