"""Compute ``regions.get``: a region and its ``quotas[]`` (metric, limit, usage), the same quotas Cloud Quotas serves.

Provider rules enforced here:
- Compute reports a region quota under its own metric name: ``NVIDIA_H100_GPUS``, ``PREEMPTIBLE_NVIDIA_L4_GPUS``,
  ``CPUS``. The limit is the Cloud Quotas value of the region (``GPUS-PER-GPU-FAMILY-per-project-region`` with
  ``gpu_family: NVIDIA_H100`` where that was set, else ``NVIDIA-H100-GPUS-per-project-region``); the usage is what
  the test set (``set_quota_usage``). Numbers are JSON doubles, as Compute sends them (``8.0``).
- An unknown region is 404 ``notFound`` in Compute's error shape; faults are Compute's too.
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any

from tests.emulators.base import FaultKind
from tests.emulators.gcp.quotas import Quotas
from tests.emulators.gcp.wire import SEG, ApiError, Call, ComputeError, Reply, Route, compute_fault, route

#: Regions the emulator knows (the fleet's and a few more); any other is 404, as a typo is in the real API.
REGIONS = ("europe-west4", "europe-west1", "us-central1", "us-east1", "asia-southeast1")
_REGION = f"/compute/v1/projects/(?P<project>{SEG})/regions/(?P<region>{SEG})"
BASE = "https://www.googleapis.com/compute/v1"


class Regions:
    """REST handlers of Compute's regions, reading the Cloud Quotas state (one quota, two APIs)."""

    def __init__(self, lock: threading.RLock, quotas: Quotas) -> None:
        self._lock = lock
        self._quotas = quotas

    def routes(self) -> list[Route]:
        return [route("GET", _REGION, "regions.get", self._get)]

    def fault(self, kind: FaultKind, operation: str, match: re.Match[str]) -> ApiError:
        return compute_fault(kind, match.group(0).removeprefix("/compute/v1/"))

    def _get(self, call: Call, m: re.Match[str]) -> Reply:
        project, region = m["project"], m["region"]
        if region not in REGIONS:
            raise ComputeError(404, "notFound", f"The resource 'projects/{project}/regions/{region}' was not found")
        quotas: list[dict[str, Any]] = [
            {"metric": metric, "limit": float(limit), "usage": float(usage)}
            for metric, (limit, usage) in sorted(self._quotas.region_quotas(project, region).items())
        ]
        body = {
            "kind": "compute#region",
            "id": str(int(hashlib.sha256(region.encode()).hexdigest()[:12], 16)),
            "name": region,
            "description": region,
            "status": "UP",
            "zones": [f"{BASE}/projects/{project}/zones/{region}-{z}" for z in "abc"],
            "quotas": quotas,
            "selfLink": f"{BASE}/projects/{project}/regions/{region}",
        }
        return Reply(200, body)
