"""Compute Engine capacity behind a GKE node pool's instance groups: zone stockouts and regional GPU quotas.

A resize sets each zone's instance group target; the group then creates instances, and Compute refuses those a
zone cannot host (``ZONE_RESOURCE_POOL_EXHAUSTED``) or the region's GPU quota does not allow (``QUOTA_EXCEEDED``).
GKE then reports the pool ``RUNNING_WITH_ERROR`` with a statusMessage such as "us-west1-c: Deploy error: Not all
instances running in IGM after 45.677691201s. Expect 1. Current errors: [ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS]:
Instance '...' creation failed: The zone '...' does not have enough resources available to fulfill the request.
'(resource type:compute)'. - ; ." (hashicorp/terraform-provider-google#3304), while the instance group keeps trying.

Quotas are checked only where a test set one (the QuotaInfo of ``NVIDIA-<GPU>-GPUS-per-project-region``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# Accelerator type -> the GPU family of its quota (``NVIDIA-<family>-GPUS-per-project-region``).
_QUOTA_FAMILY = {
    "nvidia-h100-80gb": "H100",
    "nvidia-h100-mega-80gb": "H100-MEGA",
    "nvidia-a100-80gb": "A100-80GB",
    "nvidia-tesla-a100": "A100",
    "nvidia-l4": "L4",
    "nvidia-tesla-t4": "T4",
    "nvidia-tesla-v100": "V100",
}

#: (project, quota id, region) -> the limit a test set, or None.
QuotaLookup = Callable[[str, str, str], int | None]


def gpu_quota_id(accelerator_type: str, spot: bool) -> str:
    family = _QUOTA_FAMILY.get(accelerator_type) or accelerator_type.removeprefix("nvidia-").upper()
    return f"{'PREEMPTIBLE-' if spot else ''}NVIDIA-{family}-GPUS-per-project-region"


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


@dataclass
class ZoneCapacity:
    """Stockouts per (zone, machine type); GPU quotas read through ``quota``."""

    quota: QuotaLookup
    stockouts: set[tuple[str, str]] = field(default_factory=set)

    def refusal(self, project: str, zone: str, machine_type: str, gpus: tuple[str, int, bool], used: int) -> str | None:
        """Why Compute would not create one more instance: ``gpus`` is (accelerator type, per instance, spot),
        ``used`` the GPUs of that type already running in the region. The reason is in Compute's words."""
        if (zone, machine_type) in self.stockouts:
            return (
                "[ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS]: Instance creation failed: The zone"
                f" 'projects/{project}/zones/{zone}' does not have enough resources available to fulfill the"
                " request.  '(resource type:compute)'."
            )
        accelerator, per_instance, spot = gpus
        if not accelerator or not per_instance:
            return None
        quota_id = gpu_quota_id(accelerator, spot)
        limit = self.quota(project, quota_id, region_of(zone))
        if limit is not None and used + per_instance > limit:
            metric = quota_id.removesuffix("-per-project-region").replace("-", "_")
            return (
                f"[QUOTA_EXCEEDED]: Instance creation failed: Quota '{metric}' exceeded.  Limit: {float(limit)} in"
                f" region {region_of(zone)}."
            )
        return None


def deploy_error(zone: str, expected: int, reason: str) -> str:
    """GKE's statusMessage for a zone whose instance group could not reach its target."""
    return f"{zone}: Deploy error: Not all instances running in IGM after 1m0s. Expect {expected}. Current errors: {reason} - ; ."
