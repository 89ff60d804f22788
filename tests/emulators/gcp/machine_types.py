"""Compute ``machineTypes.aggregatedList``: the machine types of every zone, with the GPUs built into them.

Provider rules enforced here:
- The answer is ``items`` keyed ``zones/<zone>``, each a ``machineTypes`` list (or a ``NO_RESULTS_ON_PAGE``
  warning where the filter matched nothing in that zone); numbers as Compute sends them.
- ``filter`` supports ``name = <value>`` (and ``name = "<value>"``), the only term callers use here; any other
  expression is 400, so a caller never mistakes an unfiltered list for a filtered one.
- Accelerator-optimized types carry their GPUs in ``accelerators[]`` (``guestAcceleratorType``/``Count``); N1 types
  carry none (their GPUs are attached per instance or node pool).
- Faults are Compute's (429 rateLimitExceeded, 503 backendError...).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from tests.emulators.base import FaultKind
from tests.emulators.gcp.regions import BASE, REGIONS
from tests.emulators.gcp.wire import SEG, ApiError, Call, ComputeError, Reply, Route, compute_fault, route

_FILTER = re.compile(r'^\s*name\s*=\s*"?(?P<name>[a-z0-9-]+)"?\s*$')


@dataclass(frozen=True)
class MachineType:
    name: str
    cpus: int
    memory_mb: int
    accelerator: str | None = None
    gpus: int = 0


#: A few real machine types (vCPUs, memory and built-in GPUs as Compute lists them).
MACHINE_TYPES = (
    MachineType("a3-highgpu-8g", 208, 1_872_000, "nvidia-h100-80gb", 8),
    MachineType("a2-highgpu-1g", 12, 87_040, "nvidia-tesla-a100", 1),
    MachineType("a2-ultragpu-8g", 96, 1_392_640, "nvidia-a100-80gb", 8),
    MachineType("g2-standard-8", 8, 32_768, "nvidia-l4", 1),
    MachineType("g2-standard-48", 48, 196_608, "nvidia-l4", 4),
    MachineType("n1-standard-8", 8, 30_720),
)


class MachineTypes:
    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock

    def routes(self) -> list[Route]:
        path = f"/compute/v1/projects/(?P<project>{SEG})/aggregated/machineTypes"
        return [route("GET", path, "machineTypes.aggregatedList", self._aggregated)]

    def fault(self, kind: FaultKind, operation: str, match: re.Match[str]) -> ApiError:
        return compute_fault(kind, match.group(0).removeprefix("/compute/v1/"))

    def _aggregated(self, call: Call, m: re.Match[str]) -> Reply:
        text = call.arg("filter")
        wanted = None
        if text:
            found = _FILTER.fullmatch(text)
            if found is None:
                raise ComputeError(400, "invalid", f"Invalid value for field 'filter': '{text}'. Invalid list filter.")
            wanted = found["name"]
        project = m["project"]
        items: dict[str, Any] = {}
        for region in REGIONS:
            for zone in (f"{region}-{z}" for z in "abc"):
                types = [_json(project, zone, t) for t in MACHINE_TYPES if wanted in (None, t.name)]
                items[f"zones/{zone}"] = (
                    {"machineTypes": types}
                    if types
                    else {
                        "warning": {
                            "code": "NO_RESULTS_ON_PAGE",
                            "message": f"There are no results for scope 'zones/{zone}' on this page.",
                            "data": [{"key": "scope", "value": f"zones/{zone}"}],
                        }
                    }
                )
        body = {
            "kind": "compute#machineTypeAggregatedList",
            "id": f"projects/{project}/aggregated/machineTypes",
            "items": items,
            "selfLink": f"{BASE}/projects/{project}/aggregated/machineTypes",
        }
        return Reply(200, body)


def _json(project: str, zone: str, machine: MachineType) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "compute#machineType",
        "name": machine.name,
        "description": f"{machine.cpus} vCPUs, {machine.memory_mb // 1024} GB RAM",
        "guestCpus": machine.cpus,
        "memoryMb": machine.memory_mb,
        "zone": zone,
        "isSharedCpu": False,
        "selfLink": f"{BASE}/projects/{project}/zones/{zone}/machineTypes/{machine.name}",
    }
    if machine.accelerator:
        body["accelerators"] = [{"guestAcceleratorType": machine.accelerator, "guestAcceleratorCount": machine.gpus}]
    return body
