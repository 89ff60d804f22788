"""Compute Engine machine types, one table for ``machineTypes.get`` (served by :mod:`.compute`) and
``machineTypes.aggregatedList`` (served here): vCPUs, memory, and for the accelerator-optimised families the GPUs
built into the type (``accelerators``), which an instance of that type does not list again as
``guestAccelerators``; N1 types carry none (their GPUs are attached per instance or node pool). Every zone offers
every type (a simplification: real zones differ). Custom types (``custom-4-5120``) are not emulated: 404.

Provider rules of the aggregated list:
- The answer is ``items`` keyed ``zones/<zone>``, each a ``machineTypes`` list (or a ``NO_RESULTS_ON_PAGE``
  warning where the filter matched nothing in that zone); numbers as Compute sends them.
- ``filter`` supports ``name = <value>`` (and ``name = "<value>"``), the only term callers use here; any other
  expression is 400, so a caller never mistakes an unfiltered list for a filtered one.
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
    accelerators: tuple[tuple[str, int], ...] = ()

    @property
    def description(self) -> str:
        return f"{self.cpus} vCPUs, {self.memory_mb / 1024:g} GB RAM" + "".join(
            f", {count} {kind}" for kind, count in self.accelerators
        )


MACHINE_TYPES: dict[str, MachineType] = {
    m.name: m
    for m in (
        MachineType("e2-medium", 2, 4096),
        MachineType("n1-standard-4", 4, 15360),
        MachineType("n1-standard-8", 8, 30720),
        MachineType("n2-standard-4", 4, 16384),
        MachineType("n2-standard-8", 8, 32768),
        MachineType("a2-highgpu-1g", 12, 87040, (("nvidia-tesla-a100", 1),)),
        MachineType("a2-highgpu-2g", 24, 174080, (("nvidia-tesla-a100", 2),)),
        MachineType("a2-highgpu-8g", 96, 696320, (("nvidia-tesla-a100", 8),)),
        MachineType("a2-ultragpu-1g", 12, 174080, (("nvidia-a100-80gb", 1),)),
        MachineType("a2-ultragpu-8g", 96, 1392640, (("nvidia-a100-80gb", 8),)),
        MachineType("a3-highgpu-8g", 208, 1916928, (("nvidia-h100-80gb", 8),)),
        MachineType("g2-standard-4", 4, 16384, (("nvidia-l4", 1),)),
        MachineType("g2-standard-8", 8, 32768, (("nvidia-l4", 1),)),
        MachineType("g2-standard-24", 24, 98304, (("nvidia-l4", 2),)),
        MachineType("g2-standard-48", 48, 196608, (("nvidia-l4", 4),)),
    )
}


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
                types = [_json(project, zone, t) for t in MACHINE_TYPES.values() if wanted in (None, t.name)]
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
    if machine.accelerators:
        body["accelerators"] = [
            {"guestAcceleratorType": kind, "guestAcceleratorCount": count} for kind, count in machine.accelerators
        ]
    return body
