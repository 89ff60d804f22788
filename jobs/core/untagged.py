"""Untagged GPU instances, pure: which GPU instances of one account miss a required tag, and the plan of marks,
clears and actions (stop, terminate) after the grace period."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

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
